"""benchmark.harness.speed.floor: the pass-count floors, FLOP counts against closed forms and
the published ResNet-18 figure, the peak table, and device slugs."""
import pytest
import torch
from torch import nn

from benchmark.harness.speed.floor import (achieved, count_flops, device_slug, encoder_images,
                                           floor_passes, pass_units, peak_line, peak_tflops)
from benchmark.harness.speed.step import build_step, train_step
from benchmark.harness.speed.timing import Settings


def test_floor_passes_follow_the_counting_model():
    """3 units per image with gradient, 1 per key: MoCo-v2 3 + 1, MixCo 1.5 * 3 + 1, ..."""
    assert pass_units((1.0, 1.0)) == 4 and pass_units((2.0, 0.0)) == 6
    assert floor_passes((1.5, 1.0), (1.0, 1.0)) == 5.5 / 4
    assert floor_passes((3.0, 0.0), (2.0, 0.0)) == 9 / 6


# What each member passes through its encoders per source image (with gradient, without), as
# its paper and loss describe it: the table of benchmark/harness/speed/floor.py.
PASSES = dict(mocov2=(1.0, 1.0), mixco=(1.5, 1.0), imix=(1.0, 1.0), unmix=(2.0, 1.0),
              mochi=(1.0, 1.0), simclr=(2.0, 0.0), mixco_simclr=(3.0, 0.0))


def test_encoder_images_are_counted_on_a_real_step_of_each_member():
    s = Settings(input_size=16, batch=4, small_stem=True)
    inputs = [torch.randn(4, 3, 16, 16) for _ in range(2)]
    counted = {}
    for method in PASSES:
        model, opt = build_step(method, s, torch.device('cpu'))
        counted[method] = encoder_images(model, lambda: train_step(model, opt, inputs), 4)
    assert counted == PASSES


def test_encoder_images_count_the_outermost_encoders_by_their_output():
    """Nested modules of the backbone's class count once; a frozen encoder's pass (no
    gradient in its output, even outside no_grad) counts as a key's."""
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Sequential(nn.Linear(3, 3)), nn.Linear(3, 3))
            self.frozen = nn.Sequential(nn.Linear(3, 3)).requires_grad_(False)

        def loss(self, x):
            return self.backbone(x).sum() + self.frozen(x).sum() + self.backbone(x[:2]).sum()
    model = Twice()
    assert encoder_images(model, lambda: model.loss(torch.randn(4, 3)), 4) == (1.5, 1.0)
    with pytest.raises(ValueError, match='Twice: no image passed through its encoders'):
        with torch.no_grad():
            encoder_images(model, lambda: model.loss(torch.randn(4, 3)), 4)


def test_count_flops_of_a_linear_layer_forward_and_backward():
    """(4 x 10) @ (10 x 5): 2 * 4 * 10 * 5 = 400 FLOPs forward; backward computes the input's
    and the weight's gradients, 400 each."""
    layer, x = nn.Linear(10, 5, bias=False), torch.randn(4, 10, requires_grad=True)
    with torch.no_grad():
        assert count_flops(lambda: layer(x)) == 400
    assert count_flops(lambda: layer(x).sum().backward()) == 1200


def test_count_flops_of_resnet18_at_224_px_is_the_published_figure():
    """torchvision's model card: ResNet-18 takes 1.81 GFLOPS (multiply-adds) at 224 px, so
    3.63e9 FLOPs at 2 per multiply-add."""
    from methods.backbones import build_resnet
    backbone = build_resnet(18, small_stem=False).eval()
    with torch.no_grad():
        flops = count_flops(lambda: backbone(torch.zeros(1, 3, 224, 224)))
    assert flops == pytest.approx(2 * 1.814e9, rel=0.01)


def test_peak_table_lookup():
    assert peak_tflops('NVIDIA H100 80GB HBM3', 'bf16') == 989.0
    assert peak_tflops('NVIDIA H200', 'fp32') == 67.0
    assert peak_tflops('NVIDIA A100-SXM4-80GB', 'bf16') is None
    assert peak_tflops('cpu', 'fp32') is None
    assert peak_line('NVIDIA H200', ['bf16', 'fp32']) == \
        'NVIDIA H200: bf16 989, fp32 67 TFLOP/s (dense)'
    assert peak_line('cpu', ['fp32']) == 'cpu: no peak known'


def test_achieved_rate_against_the_peak():
    """1,000 images/s of 10 GFLOP each is 10 TFLOP/s: a tenth of a 100 TFLOP/s peak, whose
    floor would be 10,000 images/s."""
    out = achieved(1000.0, 1e10, 100.0)
    assert out == pytest.approx(dict(tflops=10.0, peak_tflops=100.0, peak_fraction=0.1,
                                     floor_images_per_s=1e4))
    assert achieved(1000.0, 1e10, None) == dict(tflops=10.0, peak_tflops=None,
                                                peak_fraction=None, floor_images_per_s=None)


def test_device_slug():
    assert device_slug('cpu', 2) == 'cpu-2core'
    assert device_slug('NVIDIA H100 80GB HBM3', 16) == 'nvidia-h100-80gb-hbm3'
    assert device_slug('NVIDIA H200', 16) == 'nvidia-h200'
