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
    auto = GPUViewPreprocessor(view='mocov2', input_size=24)
    for a, b in zip(auto(batch())['inputs'], plain(batch())['inputs']):
        assert torch.equal(a, b)
    assert auto._graphed is None
    with pytest.raises(ValueError) as err:
        GPUViewPreprocessor(view='mocov2', input_size=24, graph=True)(batch())
    assert str(err.value) == ("model.data_preprocessor.graph=True needs a CUDA device, the "
                              "views run on cpu; set graph='auto' (a graph on CUDA only) or False")
    with pytest.raises(ValueError, match="graph must be 'auto', True or False, got 'on'"):
        GPUViewPreprocessor(view='mocov2', input_size=24, graph='on')


class ReplayedGraph:
    """A stand-in for torch.cuda.CUDAGraph on CPU tensors: capture records the function the
    block calls and its output tensor; a replay recomputes that output in place from the
    static inputs, as a CUDA graph rewrites its output memory."""
    current = None

    def __init__(self):
        self.replays = 0

    def replay(self):
        self.replays += 1
        out = self.fn(*self.static)
        self.out.copy_(out)


class Capture:
    def __init__(self, graph, capture_error_mode):
        assert capture_error_mode == 'thread_local'  # the pinning thread may allocate meanwhile
        ReplayedGraph.current = graph

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def cpu_graphs(monkeypatch):
    """torch.cuda's graph, stream and capture calls replaced for CPU tensors, and ``fn``
    wrapped so the stand-in graph knows what it captured."""
    cuda = view_graph.torch.cuda
    monkeypatch.setattr(cuda, 'CUDAGraph', ReplayedGraph)
    monkeypatch.setattr(cuda, 'graph', Capture)

    class Stream:
        def wait_stream(self, other):
            pass

    class OnStream:
        def __init__(self, stream):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False
    monkeypatch.setattr(cuda, 'current_stream', lambda device: Stream())
    monkeypatch.setattr(cuda, 'Stream', lambda device: Stream())
    monkeypatch.setattr(cuda, 'stream', OnStream)


def test_the_replayed_call_keeps_its_inputs_and_output_apart_from_the_callers(monkeypatch):
    """Capture once for the first shapes, replay with each call's inputs copied in, hand out a
    copy of the output (earlier results stay as they were), and call plainly for other shapes."""
    cpu_graphs(monkeypatch)
    calls = []

    def fn(x, y):
        calls.append(x.shape[0])
        return x * 2 + y

    graphed = GraphedCall(fn)
    real_capture = graphed.capture

    def capture(inputs):
        real_capture(inputs)
        ReplayedGraph.current.fn, ReplayedGraph.current.static = fn, graphed.static
        ReplayedGraph.current.out = graphed.out
    graphed.capture = capture
    a, b, c = (torch.full((4,), float(v)) for v in (1, 2, 3))
    first = graphed(a, b)
    assert torch.equal(first, torch.full((4,), 4.0))
    # two warm-up calls, the capture, the stand-in's replay
    assert calls == [4, 4, 4, 4] and graphed.graph.replays == 1
    second = graphed(c, a)
    assert torch.equal(second, torch.full((4,), 7.0)) and graphed.graph.replays == 2
    assert torch.equal(first, torch.full((4,), 4.0))  # a copy: the replay did not touch it
    assert first.data_ptr() != graphed.out.data_ptr()
    c.fill_(100.0)
    assert torch.equal(graphed.static[0], torch.full((4,), 3.0))  # its own copy of the inputs
    other = graphed(torch.ones(2), torch.ones(2))  # a last, smaller batch: a plain call
    assert torch.equal(other, torch.full((2,), 3.0)) and graphed.graph.replays == 2


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
    assert graphed._graphed.graph is not None
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
    pre = GPUViewPreprocessor(view='mocov2', input_size=64).to(device)
    first, second, third = (batch(32, 64, seed, pin=True) for seed in (0, 32, 64))
    pre(first)  # the capture
    torch.cuda.synchronize()
    with DispatchCount() as count:
        torch.cuda.set_sync_debug_mode('error')
        try:
            pre(second)
        finally:
            torch.cuda.set_sync_debug_mode('default')
    assert not count.host_reads and count.ops <= 120, (count.ops, count.by_name)
    pre.graph = False
    with DispatchCount() as plain:
        pre(third)
    assert plain.ops > 4 * count.ops, (plain.ops, count.ops)
    torch.cuda.synchronize()
