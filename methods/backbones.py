"""ResNet encoders from torchvision with the classifier removed."""
from torch import nn
from torchvision import models
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

RESNETS = {18: models.resnet18, 34: models.resnet34, 50: models.resnet50}
BLOCKS = {18: (BasicBlock, [2, 2, 2, 2]), 34: (BasicBlock, [3, 4, 6, 3]),
          50: (Bottleneck, [3, 4, 6, 3])}


class NarrowResNet(ResNet):
    """torchvision's ResNet with every stage's channels times ``width`` (64 width, 128 width,
    ...): the same blocks, strides and initialisation, fewer channels."""

    def __init__(self, depth: int, width: float) -> None:
        self.width = width
        super().__init__(*BLOCKS[depth])
        stem = self.channels(64)
        self.conv1 = nn.Conv2d(3, stem, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        block = BLOCKS[depth][0]
        self.fc = nn.Linear(self.channels(512) * block.expansion, self.fc.out_features)
        nn.init.kaiming_normal_(self.conv1.weight, mode='fan_out', nonlinearity='relu')

    def channels(self, planes: int) -> int:
        return max(1, round(planes * self.width))

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        if planes == 64:  # the first stage: its input is the (narrowed) stem
            self.inplanes = self.channels(64)
        return super()._make_layer(block, self.channels(planes), blocks, stride, dilate)


def backbone_name(depth: int = 18, width: float = 1.0, **_) -> str:
    """The encoder's name in records: 'resnet18', or 'resnet18-w0.25' for a narrowed one."""
    return f'resnet{depth}' + ('' if width == 1 else f'-w{float(width):g}')


def build_resnet(depth: int = 18, small_stem: bool = False, width: float = 1.0) -> nn.Module:
    """Build a randomly initialised torchvision ResNet whose forward returns pooled features.

    Args:
        depth: 18, 34 or 50.
        small_stem: Replace the ImageNet stem (7x7 stride-2 conv + max-pool) by a 3x3 stride-1
            conv without max-pool, the usual choice for 32/64-px inputs. The paper's Tiny-ImageNet
            runs keep the ImageNet stem and upsample to 224 px instead.
        width: Channels of every stage times this (1: torchvision's network itself; 0.25: 16,
            32, 64 and 128 channels for ResNet-18, about a tenth of its time on a CPU).

    Returns:
        A module mapping (N, 3, H, W) to (N, C) with C = `module.feature_dim` (512 or 2048
        times ``width``).
    """
    if depth not in RESNETS:
        raise ValueError(f'backbone depth must be one of {sorted(RESNETS)}, got {depth}')
    if not isinstance(width, (int, float)) or isinstance(width, bool) or not 0 < width <= 1:
        raise ValueError(f'backbone width must be a number in (0, 1], got {width!r}')
    net = RESNETS[depth](weights=None) if width == 1 else NarrowResNet(depth, float(width))
    if small_stem:
        net.conv1 = nn.Conv2d(3, net.bn1.num_features, kernel_size=3, stride=1, padding=1,
                              bias=False)
        net.maxpool = nn.Identity()
    net.feature_dim = net.fc.in_features
    net.fc = nn.Identity()
    return net
