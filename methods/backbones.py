"""ResNet encoders from torchvision with the classifier removed."""
from torch import nn
from torchvision import models

RESNETS = {18: models.resnet18, 34: models.resnet34, 50: models.resnet50}


def build_resnet(depth: int = 18, small_stem: bool = False) -> nn.Module:
    """Build a randomly initialised torchvision ResNet whose forward returns pooled features.

    Args:
        depth: 18, 34 or 50.
        small_stem: Replace the ImageNet stem (7x7 stride-2 conv + max-pool) by a 3x3 stride-1
            conv without max-pool, the usual choice for 32/64-px inputs. The paper's Tiny-ImageNet
            runs keep the ImageNet stem and upsample to 224 px instead.

    Returns:
        A module mapping (N, 3, H, W) to (N, C) with C = `module.feature_dim` (512 or 2048).
    """
    if depth not in RESNETS:
        raise ValueError(f'backbone depth must be one of {sorted(RESNETS)}, got {depth}')
    net = RESNETS[depth](weights=None)
    if small_stem:
        net.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
    net.feature_dim = net.fc.in_features
    net.fc = nn.Identity()
    return net
