"""The device views replayed as one CUDA graph: the host queues one launch, not hundreds.

Eager, one call of the device views dispatches about 465 operations, each a kernel launch of a
few microseconds of host time (10 ms per batch of 128 on an H200's host, measured alone; 32 ms
inside the training loop, while the loader workers share its cores). The views have fixed shapes
for every full batch and read nothing back from the device, so they can be captured once as a
CUDA graph (`torch.cuda.CUDAGraph`) and replayed: per batch, two copies into the graph's
inputs, one replay, one copy out of its output.

The first batch of a shape is its capture: two plain calls on a side stream (cuBLAS and the
allocator set themselves up; torch's CUDA graph notes ask for them), then the capture, which
synchronises the device once. Two shapes get a graph each (the full batch, and an epoch's last,
smaller batch, in whichever order they come: a run resumed at an epoch's last iteration meets
the small one first); any further shape is drawn by a plain call. Either way the same kernels,
so the same views. A replay first waits for the previous replay of its graph to be copied out,
so calls from different streams (a side stream drawing ahead, the default stream) never
overwrite each other's inputs or output. Capture errors are those of the calling thread only
(``capture_error_mode='thread_local'``): the loader's pinning thread may allocate pinned memory
meanwhile. A capture that fails (an operation a CUDA graph cannot hold, a driver that refuses)
is said once as a warning, and from then on every call is a plain one: the same views, slower.
"""
from __future__ import annotations

import warnings
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import Tensor

WARMUP_CALLS = 2
MAX_GRAPHS = 2  # the full batch and an epoch's last one


def side_stream_calls(fn: Callable[[], object], times: int, device: torch.device) -> None:
    """``fn()`` `times` times on a new side stream ordered after the current one, which then
    waits for it: a CUDA graph's warm-up (lazy initialisations happen outside the capture)."""
    current = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):
        for _ in range(times):
            fn()
    current.wait_stream(side)


class Captured:
    """One CUDA graph of ``fn``: its static inputs, its output, and the event after the last
    copy of that output."""

    def __init__(self, fn: Callable[..., Tensor], inputs: Tuple[Tensor, ...], warmup: int):
        self.static = tuple(t.clone() for t in inputs)
        side_stream_calls(lambda: fn(*self.static), warmup, inputs[0].device)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode='thread_local'):
            self.out = fn(*self.static)
        self.done: Optional[torch.cuda.Event] = None

    def __call__(self, inputs: Tuple[Tensor, ...], copy_in: bool) -> Tensor:
        stream = torch.cuda.current_stream(self.out.device)
        if self.done is not None:  # the last replay's output copied out, whatever its stream
            stream.wait_event(self.done)
        if copy_in:
            for static, tensor in zip(self.static, inputs):
                static.copy_(tensor, non_blocking=True)
        self.graph.replay()
        out = self.out.clone()
        self.done = torch.cuda.Event()
        self.done.record(stream)
        return out


class GraphedCall:
    """``fn(*inputs) -> Tensor`` on CUDA tensors, replayed from a CUDA graph per input
    signature (shapes, dtypes, device; `MAX_GRAPHS` of them), called plainly for any other.

    The output is a copy of the graph's own output tensor, which the next replay overwrites, so
    a caller may keep what it gets as long as it likes.
    """

    def __init__(self, fn: Callable[..., Tensor], warmup: int = WARMUP_CALLS) -> None:
        self.fn, self.warmup = fn, warmup
        self.graphs: Dict[Tuple, Captured] = {}
        self.failed: Optional[str] = None  # why a capture failed: no graphs from then on

    @staticmethod
    def signature(inputs: Tuple[Tensor, ...]) -> Tuple:
        return tuple((tuple(t.shape), t.dtype, t.device) for t in inputs)

    def __call__(self, *inputs: Tensor) -> Tensor:
        key = self.signature(inputs)
        captured = self.graphs.get(key)
        if captured is not None:
            return captured(inputs, copy_in=True)
        if len(self.graphs) >= MAX_GRAPHS or self.failed is not None:
            return self.fn(*inputs)
        try:
            captured = Captured(self.fn, inputs, self.warmup)
        except RuntimeError as err:
            self.failed = f'{type(err).__name__}: {err}'.splitlines()[0]
            warnings.warn(f'device views: the CUDA graph capture failed ({self.failed}); the '
                          f'views are drawn by plain calls from now on (the same views, more '
                          f"host time); model.data_preprocessor.graph=False skips the capture")
            return self.fn(*inputs)
        self.graphs[key] = captured
        return captured(inputs, copy_in=False)  # its static inputs are this call's
