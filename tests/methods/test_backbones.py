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


def _conv_widths(net: nn.Module) -> list:
    return [m.out_channels for m in net.modules() if isinstance(m, nn.Conv2d)]


@pytest.mark.parametrize('depth, width, dim', [(18, 0.25, 128), (18, 0.5, 256), (50, 0.5, 1024)])
def test_a_narrowed_resnet_is_torchvisions_with_every_channel_count_scaled(depth, width, dim):
    """Every convolution's and BatchNorm's channels are torchvision's times the width; the
    blocks, strides and forward are torchvision's (the layers applied by hand agree)."""
    net, full = build_resnet(depth, width=width).eval(), build_resnet(depth)
    assert net.feature_dim == dim
    assert _conv_widths(net) == [round(c * width) for c in _conv_widths(full)]
    assert [m.stride for m in net.modules() if isinstance(m, nn.Conv2d)] == \
        [m.stride for m in full.modules() if isinstance(m, nn.Conv2d)]
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(net(x), _manual_forward(net, x, maxpool=True), rtol=1e-5,
                                   atol=1e-6)
    assert net(x).shape == (2, dim)
    stem = build_resnet(depth, small_stem=True, width=width).conv1
    assert (stem.out_channels, stem.kernel_size) == (round(64 * width), (3, 3))


def test_width_one_is_torchvisions_network_and_a_bad_width_is_one_line():
    torch.manual_seed(3)
    one = build_resnet(18, width=1)
    torch.manual_seed(3)
    assert all(torch.equal(a, b) for a, b in zip(one.state_dict().values(),
                                                build_resnet(18).state_dict().values()))
    for bad in (0, 1.5, 'half', True):
        with pytest.raises(ValueError, match=r'^backbone width must be a number in \(0, 1\], got '):
            build_resnet(18, width=bad)


def test_a_narrowed_backbone_has_its_own_name_in_records_and_tables():
    from benchmark.reports.leaderboard import backbone_label
    from methods.backbones import backbone_name
    assert backbone_name(18) == 'resnet18' and backbone_name(18, width=1.0) == 'resnet18'
    assert backbone_name(depth=18, width=0.25, small_stem=False) == 'resnet18-w0.25'
    assert backbone_label('resnet18') == 'ResNet-18'
    assert backbone_label('resnet18-w0.25') == 'ResNet-18 (width 0.25)'
