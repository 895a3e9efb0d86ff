"""Views drawn one batch ahead (benchmark.data.view_prefetch, GPUViewPreprocessor.prepare): the
same views as a plain call; on a GPU drawn on a side stream during the step before, whole when
the step reads them, and with no wait of the host for the device."""
import pytest
import torch

from benchmark.data.gpu_views import GPUViewPreprocessor
from benchmark.data.view_prefetch import READY, is_ready, take, tensors
from benchmark.engine.prefetch_loop import one_ahead


def batch(n=8, size=16, first_seed=0, pin=False):
    x = torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8,
                      generator=torch.Generator().manual_seed(first_seed))
    seeds = torch.arange(first_seed, first_seed + n)
    return dict(inputs=x.pin_memory() if pin else x, data_samples=seeds, seed=seeds)


def test_a_prepared_batch_is_the_plain_call_and_passes_through_forward():
    pre = GPUViewPreprocessor(view='mocov2', input_size=24)
    assert not pre.prefetches()  # 'auto' by default: on CUDA only
    assert pre.prefetch == 'auto' and pre.graph == 'auto'
    prepared = pre.prepare(batch())
    assert is_ready(prepared) and prepared[READY] is None and not is_ready(batch())
    out, plain = pre(prepared, training=True), pre(batch(), training=True)
    assert set(out) == {'inputs', 'data_samples'}
    assert all(torch.equal(a, b) for a, b in zip(out['inputs'], plain['inputs']))
    assert torch.equal(out['data_samples'], plain['data_samples'])
    assert GPUViewPreprocessor(view='mocov2', input_size=24, prefetch=True).prefetches()
    assert not GPUViewPreprocessor(view='mocov2', input_size=24, prefetch=False).prefetches()
    with pytest.raises(ValueError, match="prefetch must be 'auto', True or False, got 'yes'"):
        GPUViewPreprocessor(view='mocov2', input_size=24, prefetch='yes')
    with pytest.raises(ValueError, match="graph must be 'auto', True or False, got 1"):
        GPUViewPreprocessor(view='mocov2', input_size=24, graph=1)
    assert [t.shape for t in tensors([torch.ones(1), (torch.ones(2), 'x')])] == [(1,), (2,)]
    assert take({READY: None, 'inputs': 1}) == {'inputs': 1}
    seedless = dict(inputs=batch()['inputs'], data_samples=torch.arange(8))
    assert pre.prepare(seedless) is seedless  # drawn at its step: the generator's order kept


@pytest.mark.cuda
def test_views_drawn_on_a_side_stream_reach_each_step_whole_and_never_wait():
    from benchmark.harness.speed.step import build_step, train_step
    from benchmark.harness.speed.timing import Settings
    device = torch.device('cuda')
    model, opt = build_step('mixco', Settings(input_size=32, batch=16), device)
    pre = GPUViewPreprocessor(view='mocov2', input_size=32, graph='auto',
                              prefetch='auto').to(device)
    plain = GPUViewPreprocessor(view='mocov2', input_size=32, graph=False,
                                prefetch=False).to(device)
    assert pre.prefetches()
    batches = [batch(16, 64, seed, pin=True) for seed in range(0, 80, 16)]
    pre(batch(16, 64, 999, pin=True))  # the graph's capture (it synchronises once)
    make = pre.make
    # the side stream held back ~20 ms before each batch's views: a step that did not wait for
    # its batch's event would read views not yet drawn
    pre.make = lambda data: (torch.cuda._sleep(40_000_000), make(data))[1]
    train_step(model, opt, plain(batch(16, 64, 998))['inputs'], torch.bfloat16)
    torch.cuda.synchronize()
    got = []
    torch.cuda.set_sync_debug_mode('error')
    try:
        for data in one_ahead([dict(b) for b in batches], pre.prepare):
            views = pre(data, training=True)['inputs']
            got.append([v.clone() for v in views])  # read on the step's stream, as the step
            train_step(model, opt, views, torch.bfloat16)
    finally:
        torch.cuda.set_sync_debug_mode('default')
    torch.cuda.synchronize()
    for b, views in zip(batches, got):
        for g, p in zip(views, plain(dict(b))['inputs']):
            torch.testing.assert_close(g, p, rtol=0, atol=1e-5)
