"""bfloat16 training without a GPU: CPUCapableAmpOptimWrapper (benchmark/compat.py).

mmengine 0.10.7's AmpOptimWrapper asserts an accelerator in __init__; torch autocasts bfloat16
on the CPU. The step tests run MoCo and MixCo one mmengine `train_step` in bfloat16 with
channels_last against the float32 step from the same weights, batch and lambdas.
"""
import copy

import pytest
import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper

from benchmark.engine.channels_last import use_channels_last
from benchmark.engine.compat import CPUCapableAmpOptimWrapper
from methods.mixco_moco import MixCoMoCo
from methods.moco import MoCo

NO_ACCELERATOR = not torch.cuda.is_available()
# |bf16 - fp32| / fp32 of each loss term (ResNet-18 small stem, 16 px, batch 8, queue 32). This
# test (seed 0), 1 and 2 threads: MoCo 0.006 / 0.015; MixCo inst 0.002 / 0.011, mix 0.008 /
# 0.005. Over seeds 0-7 (1 thread) the largest were inst 0.016, mix 0.052: tau_mix = 0.05
# multiplies the bf16 encoder's error by 20. The bound keeps 3x over this test's worst case.
STEP_RTOL = 0.05
# Cosine of the bf16 and fp32 steps' weight changes: 0.949-0.962 measured.
MIN_UPDATE_COSINE = 0.9


def sgd(model, lr=0.1):
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr,
                           momentum=0.9)


@pytest.mark.skipif(not NO_ACCELERATOR, reason='the upstream assert only fires without a GPU')
def test_stock_amp_wrapper_refuses_the_cpu():
    """The upstream cause: mmengine's AmpOptimWrapper will not start without an accelerator."""
    with pytest.raises(AssertionError, match='only available training on gpu'):
        AmpOptimWrapper(optimizer=sgd(torch.nn.Linear(2, 2)), dtype='bfloat16')


@pytest.mark.skipif(not NO_ACCELERATOR, reason='the CPU path is taken only without a GPU')
def test_cpu_wrapper_autocasts_bf16_and_steps_like_plain_sgd():
    """Inside optim_context a Linear runs in bf16; the update equals SGD on the same loss."""
    torch.manual_seed(0)
    net, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
    ref = copy.deepcopy(net)
    wrapper = CPUCapableAmpOptimWrapper(optimizer=sgd(net), dtype='bfloat16')
    with wrapper.optim_context(net):
        out = net(x)
    assert out.dtype == torch.bfloat16
    wrapper.update_params(out.float().pow(2).sum())
    with torch.autocast('cpu', dtype=torch.bfloat16):  # by hand: no loss scaling
        ref_out = ref(x)
    ref_opt = sgd(ref)
    ref_out.float().pow(2).sum().backward()
    ref_opt.step()
    for a, b in zip(net.parameters(), ref.parameters()):
        assert torch.equal(a, b)
    state = wrapper.state_dict()
    again = CPUCapableAmpOptimWrapper(optimizer=sgd(copy.deepcopy(net)), dtype='bfloat16')
    again.load_state_dict(copy.deepcopy(state))
    assert again.optimizer.state_dict()['state'].keys() == state['state'].keys()


@pytest.mark.skipif(not NO_ACCELERATOR, reason='the CPU path is taken only without a GPU')
@pytest.mark.parametrize('dtype', ['float16', None])
def test_other_dtypes_without_gpu_are_one_line_errors(dtype):
    with pytest.raises(ValueError, match=r"optim_wrapper.dtype=.*only 'bfloat16'") as err:
        CPUCapableAmpOptimWrapper(optimizer=sgd(torch.nn.Linear(2, 2)), dtype=dtype)
    assert '\n' not in str(err.value)


def record_layer1(model, seen):
    """Forward hook: dtype and NHWC-ness of the query backbone's layer1 output."""
    return model.backbone.layer1.register_forward_hook(
        lambda mod, args, out: seen.append(
            (out.dtype, out.is_contiguous(memory_format=torch.channels_last))))


@pytest.mark.slow
@pytest.mark.skipif(not NO_ACCELERATOR, reason='with a GPU the wrapper autocasts the GPU')
@pytest.mark.parametrize('cls', [MoCo, MixCoMoCo])
def test_bf16_channels_last_step_is_close_to_fp32(cls):
    """Same weights, batch and lambdas: losses within STEP_RTOL, updates aligned, queue float32."""
    check_bf16_step(cls, torch.device('cpu'))


@pytest.mark.cuda
@pytest.mark.parametrize('cls', [MoCo, MixCoMoCo])
def test_bf16_channels_last_step_on_cuda_is_close_to_fp32(cls):
    """The same check on the GPU, where the wrapper is mmengine's AmpOptimWrapper (the fast
    configs' settings: bfloat16, no loss scaling)."""
    check_bf16_step(cls, torch.device('cuda'))


def check_bf16_step(cls, device):
    torch.manual_seed(0)
    fp32 = cls(backbone=dict(depth=18, small_stem=True), feature_dim=16,
               queue_size=32).train().to(device)
    fast = use_channels_last(copy.deepcopy(fp32))
    gen = torch.Generator().manual_seed(100)
    data = dict(inputs=[torch.randn(8, 3, 16, 16, generator=gen).to(device) for _ in range(2)])
    seen = []
    handle = record_layer1(fast, seen)
    torch.manual_seed(7)  # the same lambdas in both steps
    ref = fp32.train_step(copy.deepcopy(data), OptimWrapper(sgd(fp32)))
    torch.manual_seed(7)
    out = fast.train_step(copy.deepcopy(data), CPUCapableAmpOptimWrapper(
        optimizer=sgd(fast), dtype='bfloat16', loss_scale=dict(enabled=False)))
    handle.remove()
    assert seen and all(s == (torch.bfloat16, True) for s in seen)  # bf16 and NHWC ran
    terms = [k for k in ref if k.startswith('loss_')]
    for key in terms:
        assert out[key].dtype == torch.float32 and torch.isfinite(out[key])
        assert out[key].item() == pytest.approx(ref[key].item(), rel=STEP_RTOL), key
    assert any(out[k].item() != ref[k].item() for k in terms)  # not silently float32
    assert fast.queue.dtype == torch.float32
    torch.testing.assert_close(fast.queue[:8], fp32.queue[:8], rtol=0, atol=0.05)
    w = fast.backbone.conv1.weight
    assert w.is_contiguous(memory_format=torch.channels_last) and w.dtype == torch.float32
    # The updates point the same way: cosine of the two steps' changes of all trained weights.
    torch.manual_seed(0)
    start = cls(backbone=dict(depth=18, small_stem=True), feature_dim=16,
                queue_size=32).to(device)
    deltas = [torch.cat([(p - p0).flatten() for p, p0 in zip(m.parameters(), start.parameters())
                         if p0.requires_grad]) for m in (fp32, fast)]
    cosine = torch.nn.functional.cosine_similarity(*deltas, dim=0).item()
    assert cosine > MIN_UPDATE_COSINE
