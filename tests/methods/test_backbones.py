"""build_resnet: torchvision's ResNets without the classifier, with an optional small stem."""
import pytest
import torch
from torch import nn
from torchvision import models

from methods.backbones import RESNETS, build_resnet


def _manual_forward(net: nn.Module, x: torch.Tensor, maxpool: bool) -> torch.Tensor:
    """torchvision's ResNet forward written out, stopping at the pooled features."""
    x = net.relu(net.bn1(net.conv1(x)))
    if maxpool:
        x = nn.functional.max_pool2d(x, kernel_size=3, stride=2, padding=1)
    for layer in (net.layer1, net.layer2, net.layer3, net.layer4):
        x = layer(x)
    return x.mean(dim=(2, 3))  # global average pool, N x C


def _params(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


@pytest.mark.parametrize('depth,dim', [(18, 512), (34, 512), (50, 2048)])
def test_parameters_are_torchvisions_minus_the_classifier(depth, dim):
    """Same weights as torchvision's ResNet-<depth> without its 1000-way fc layer."""
    net = build_resnet(depth)
    reference = RESNETS[depth](weights=None)
    assert net.feature_dim == dim
    assert isinstance(net.fc, nn.Identity)
    assert _params(net) == _params(reference) - (dim * 1000 + 1000)
    if depth == 18:  # the published count: 11,689,512 with the classifier
        assert _params(net) == 11_689_512 - 513_000


def test_small_stem_is_a_3x3_stride_1_conv_without_maxpool():
    net = build_resnet(18, small_stem=True)
    conv = net.conv1
    assert (conv.kernel_size, conv.stride, conv.padding) == ((3, 3), (1, 1), (1, 1))
    assert conv.bias is None
    assert isinstance(net.maxpool, nn.Identity)
    # 7x7x3x64 = 9,408 stem weights replaced by 3x3x3x64 = 1,728.
    assert _params(net) == _params(build_resnet(18)) - 9408 + 1728


@pytest.mark.parametrize('small_stem', [False, True])
def test_forward_returns_the_pooled_features(small_stem):
    """forward == the layers applied by hand, then the global average pool."""
    torch.manual_seed(0)
    net = build_resnet(18, small_stem=small_stem).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        out, ref = net(x), _manual_forward(net, x, maxpool=not small_stem)
    assert out.shape == (2, 512)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(out[0], out[1])  # two inputs, two feature vectors


def test_matches_torchvision_weights_for_weights():
    """Loading the backbone's weights into torchvision's model gives its pre-fc activations."""
    net = build_resnet(18).eval()
    reference = models.resnet18(weights=None).eval()
    reference.load_state_dict(net.state_dict(), strict=False)  # fc stays random, then bypassed
    reference.fc = nn.Identity()
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(net(x), reference(x), rtol=0, atol=0)


def test_unknown_depth_is_one_line_value_error():
    with pytest.raises(ValueError,
                       match=r'^backbone depth must be one of \[18, 34, 50\], got 101$'):
        build_resnet(101)
