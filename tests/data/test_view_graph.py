"""The device views replayed from a CUDA graph (benchmark.data.view_graph): the same views as
plain calls, a copy the caller keeps, plain calls for other shapes, one line for a bad switch;
on a GPU, a handful of host operations per batch and no wait for the device."""
import pytest
import torch

from benchmark.data import view_graph
from benchmark.data.gpu_views import GPUViewPreprocessor
from benchmark.data.view_graph import GraphedCall
from benchmark.harness.speed.dispatch import DispatchCount


def batch(n=8, size=16, first_seed=0, pin=False):
    x = torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8,
                      generator=torch.Generator().manual_seed(first_seed))
    if pin:
        x = x.pin_memory()
    seeds = torch.arange(first_seed, first_seed + n)
    return dict(inputs=x, data_samples=seeds, seed=seeds)


def test_auto_on_a_cpu_draws_plainly_and_true_there_is_one_line():
    plain = GPUViewPreprocessor(view='mocov2', input_size=24, graph=False)
    auto = GPUViewPreprocessor(view='mocov2', input_size=24, graph='auto')
    for a, b in zip(auto(batch())['inputs'], plain(batch())['inputs']):
        assert torch.equal(a, b)
    assert auto._graphed is None
    with pytest.raises(ValueError) as err:
        GPUViewPreprocessor(view='mocov2', input_size=24, graph=True)(batch())
    assert str(err.value) == ("model.data_preprocessor.graph=True needs a CUDA device, the "
                              "views run on cpu; set graph='auto' (a graph on CUDA only) or False")
    with pytest.raises(ValueError, match="graph must be 'auto', True or False, got 'on'"):
        GPUViewPreprocessor(view='mocov2', input_size=24, graph='on')


def test_a_copy_of_the_preprocessor_leaves_graphs_and_stream_behind():
    """copy.deepcopy of the model (the record's compute count makes one after training) works
    once the views hold CUDA graphs and a side stream, which cannot be copied; the copy makes
    its own and draws the same views."""
    import copy
    import threading
    pre = GPUViewPreprocessor(view='mocov2', input_size=24)
    pre._graphed, pre._side.stream = threading.Lock(), threading.Lock()  # not copyable either
    with pytest.raises(TypeError):
        copy.deepcopy(threading.Lock())
    twin = copy.deepcopy(pre)
    assert twin._graphed is None and twin._side.stream is None and pre._graphed is not None
    for a, b in zip(twin(batch())['inputs'], GPUViewPreprocessor(
            view='mocov2', input_size=24)(batch())['inputs']):
        assert torch.equal(a, b)


class ReplayedGraph:
    """A stand-in for torch.cuda.CUDAGraph on CPU tensors: a replay recomputes the captured
    output in place from the static inputs, as a CUDA graph rewrites its output memory."""

    def __init__(self):
        self.replays = 0

    def replay(self):
        self.replays += 1
        self.out.copy_(self.fn(*self.static))


class Nothing:
    """A stream, event or context that does nothing (one stream on a CPU)."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __getattr__(self, name):
        return lambda *args: None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def cpu_graphs(monkeypatch):
    """torch.cuda's graph, stream and event calls replaced for CPU tensors; each capture tells
    its stand-in graph what it captured."""
    cuda = view_graph.torch.cuda
    monkeypatch.setattr(cuda, 'CUDAGraph', ReplayedGraph)
    monkeypatch.setattr(cuda, 'graph', Nothing)
    for name in ('current_stream', 'Stream', 'stream', 'Event'):
        monkeypatch.setattr(cuda, name, Nothing)
    real_init = view_graph.Captured.__init__

    def init(self, fn, inputs, warmup):
        real_init(self, fn, inputs, warmup)
        self.graph.fn, self.graph.static, self.graph.out = fn, self.static, self.out
    monkeypatch.setattr(view_graph.Captured, '__init__', init)


def test_the_replayed_call_keeps_its_inputs_and_output_apart_from_the_callers(monkeypatch):
    """A graph per shape (two at most), captured at its first call; each replay with the
    call's inputs copied in, handing out a copy of the output (earlier results stay as they
    were); a third shape called plainly."""
    cpu_graphs(monkeypatch)
    calls = []

    def fn(x, y):
        calls.append(x.shape[0])
        return x * 2 + y

    graphed = GraphedCall(fn)
    a, b, c = (torch.full((4,), float(v)) for v in (1, 2, 3))
    first = graphed(a, b)
    assert torch.equal(first, torch.full((4,), 4.0))
    # two warm-up calls, the capture, the stand-in's replay
    full = graphed.graphs[graphed.signature((a, b))]
    assert calls == [4, 4, 4, 4] and full.graph.replays == 1
    second = graphed(c, a)
    assert torch.equal(second, torch.full((4,), 7.0)) and full.graph.replays == 2
    assert torch.equal(first, torch.full((4,), 4.0))  # a copy: the replay did not touch it
    assert first.data_ptr() != full.out.data_ptr()
    c.fill_(100.0)
    assert torch.equal(full.static[0], torch.full((4,), 3.0))  # its own copy of the inputs
    small = graphed(torch.ones(2), torch.ones(2))  # an epoch's last, smaller batch: its graph
    assert torch.equal(small, torch.full((2,), 3.0)) and len(graphed.graphs) == 2
    assert torch.equal(graphed(torch.zeros(2), torch.ones(2)), torch.ones(2))
    calls.clear()
    third = graphed(torch.ones(3), torch.ones(3))  # a third shape: a plain call
    assert torch.equal(third, torch.full((3,), 3.0)) and calls == [3]
    assert len(graphed.graphs) == 2 and full.graph.replays == 2


@pytest.mark.cuda
@pytest.mark.parametrize('compiled', [False, True])
def test_graphed_views_are_the_plain_views_and_stay_as_handed_out(compiled):
    device = torch.device('cuda')
    graphed = GPUViewPreprocessor(view='mocov2', input_size=48, compile=compiled,
                                  graph=True).to(device)
    plain = GPUViewPreprocessor(view='mocov2', input_size=48, compile=compiled,
                                graph=False).to(device)
    batches = [batch(16, 64, 0, pin=True), batch(16, 64, 16, pin=True), batch(5, 64, 32)]
    got = [graphed(dict(b))['inputs'] for b in batches]
    kept = [[v.clone() for v in views] for views in got]
    assert len(graphed._graphed.graphs) == 2  # the full batches' and the last one's
    import copy
    twin = copy.deepcopy(graphed)  # as the record's compute count does with the model
    assert twin._graphed is None and twin._side.stream is None
    for b, views, copies in zip(batches, got, kept):
        for g, p, k in zip(views, plain(dict(b))['inputs'], copies):
            torch.testing.assert_close(g, p, rtol=0, atol=1e-5)
            assert torch.equal(g, k)  # later replays left what was handed out alone


@pytest.mark.cuda
def test_a_replayed_batch_is_a_few_host_operations_and_no_wait():
    """After the capture a full batch costs the parameter draw on the CPU, the copies and one
    replay: tens of dispatched operations, not the plain call's hundreds, none a host read,
    and no wait for the device under torch's sync check."""
    device = torch.device('cuda')
    pre = GPUViewPreprocessor(view='mocov2', input_size=64, graph='auto').to(device)
    first, second, third = (batch(32, 64, seed, pin=True) for seed in (0, 32, 64))
    pre(first)  # the capture
    torch.cuda.synchronize()
    with DispatchCount() as count:
        torch.cuda.set_sync_debug_mode('error')
        try:
            pre(second)
        finally:
            torch.cuda.set_sync_debug_mode('default')
    assert not count.host_reads and count.ops <= 150, (count.ops, count.by_name)
    pre.graph = False
    with DispatchCount() as plain:
        pre(third)
    assert plain.ops >= 3 * count.ops, (plain.ops, count.ops)
    torch.cuda.synchronize()


def test_a_failed_capture_is_one_warning_and_plain_calls_after_it(monkeypatch):
    """A capture that raises (an operation a CUDA graph cannot hold) does not end the run: one
    warning naming the error and the switch, then plain calls, the same results."""
    cpu_graphs(monkeypatch)

    def refuse(*args, **kwargs):
        raise RuntimeError('operation not permitted when stream is capturing\nmore')
    monkeypatch.setattr(view_graph.torch.cuda, 'CUDAGraph', refuse)
    graphed = GraphedCall(lambda x: x + 1)
    with pytest.warns(UserWarning) as caught:
        assert torch.equal(graphed(torch.zeros(3)), torch.ones(3))
        assert torch.equal(graphed(torch.ones(3)), torch.full((3,), 2.0))
        assert torch.equal(graphed(torch.ones(2)), torch.full((2,), 2.0))
    assert len(caught) == 1 and not graphed.graphs
    assert str(caught[0].message) == (
        'device views: the CUDA graph capture failed (RuntimeError: operation not permitted '
        'when stream is capturing); the views are drawn by plain calls from now on (the same '
        'views, more host time); model.data_preprocessor.graph=False skips the capture')
