"""Timing and memory primitives of the speed harness: drained clocks, alternation, paired ratios,
peak bytes of a step on the CPU (profiler events) or a GPU (max_memory_allocated)."""
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence

import torch


def sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of fn() with the device's queue drained before and after."""
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def in_turn(items: list, round_index: int) -> list:
    """A B C in even rounds, C B A in odd ones, so a linear drift favours no variant."""
    return items if round_index % 2 == 0 else items[::-1]


def paired_ratio(a: List[float], b: List[float]) -> float:
    """Median of a[i] / b[i]: ratios of adjacent measurements cancel the machine's drift."""
    return statistics.median(x / y for x, y in zip(a, b))


def own_bytes(model, optimizer, inputs: List[torch.Tensor]) -> int:
    """Bytes of the distinct storages of weights, buffers, optimizer state and inputs."""
    state = [v for st in optimizer.state.values() for v in st.values() if torch.is_tensor(v)]
    storages = {}
    for t in [*model.parameters(), *model.buffers(), *state, *inputs]:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def cpu_peak_growth(fn: Callable[[], object]) -> int:
    """Peak growth of live CPU tensor bytes while fn() runs (torch.profiler memory events).

    Every allocation and free through c10's CPU allocator is an event with a signed size; the
    running sum in time order is the live-byte growth, and its maximum is the peak (the CPU
    analogue of max_memory_allocated). Frees of tensors allocated before profiling carry no event,
    so call this on a step that frees only what steps allocate (one warm-up step before).
    """
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation and event.extra_fields.device.type == 'cpu':
            events.append((event.start_time_ns, event.extra_fields.alloc_size))
        stack.extend(event.children)
    live = peak = 0
    for _, size in sorted(events):
        live += size
        peak = max(peak, live)
    return peak


def step_peak_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak growth of allocated tensor bytes during fn() on `device`."""
    if device.type != 'cuda':
        return cpu_peak_growth(fn)
    sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    fn()
    sync(device)
    return torch.cuda.max_memory_allocated(device) - base


NAMED_ONLY = ('demo',)  # parts that run only when asked for (minutes of real runs)


@dataclass
class Settings:
    """What to measure; the defaults finish in about 2 minutes on two AVX-512 CPU cores
    (10 on the slowest CPUs known); bench.FULL's in about 5 there."""

    depth: int = 18
    input_size: int = 32
    batch: int = 32
    small_stem: bool = False
    repeats: int = 6
    warmup: int = 1  # the FLOP count before them runs a step too
    pipeline_rounds: int = 2
    pipeline_iters: Optional[int] = 6  # timed iterations per epoch; None: the whole epoch
    pipeline_warmup: int = 2
    num_workers: Optional[int] = None  # None: the config's
    profile: bool = False  # pipeline: torch.profiler tables of one more iteration
    threads: Optional[int] = None  # torch and faiss threads; None: 1 on CPU, torch's on GPU
    images: Optional[int] = None  # training images of the fake folder; None: what the parts need
    data_dir: Optional[str] = None  # keep the fake folder here and reuse it; None: a temp dir
    feature_images: int = 256
    feature_batch: int = 256  # extract_features' batch (tools/eval.py's --batch-size default)
    knn_bank: int = 20000
    knn_queries: int = 1000
    knn_dim: int = 512
    knn_k: int = 200
    knn_classes: int = 200
    knn_chunk: int = 1000
    knn_repeats: int = 3
    precision: str = 'fp32'  # or 'bf16': autocast (bare steps) / CPUCapableAmpOptimWrapper (Runner)
    channels_last: bool = False  # model and image batches in NHWC (benchmark/engine/channels_last.py)
    # or 'gpu' / 'gpue' (no CUDA graph) / 'gpuc' (compiled): the config gets VIEWS_OPTIONS[views]
    views: str = 'pil'
    compile: bool = False  # torch.compile of the encoders (CompileHook)
    step_graph: bool = False  # the step after the views as one CUDA graph (StepGraphHook)
    configs: Sequence[str] = field(default_factory=tuple)  # pipeline grid; () = the one above
    paper: bool = False  # the paper's setting: the headline paper_setting_* keys
    views_native: int = 64  # side of the decoded images of the views part
    loop_rounds: int = 3  # loop part: rounds of Runner and plain-loop blocks in turn
    loop_iters: int = 4  # loop part: iterations per block with the ResNet
    loop_null_iters: int = 30  # loop part: iterations per block with the near-zero model
    loop_history: int = 100000  # loop part: logged values per scalar in its second phase
    loop_warmup: int = 2  # loop part: untimed iterations of each loop first
    views_repeats: int = 3
    demo_epochs: int = 3  # demo part: epochs per run (the first is not counted)
    demo_rounds: int = 1  # demo part: rounds of the three views variants in turn
    skip: Sequence[str] = NAMED_ONLY  # of PARTS; the demo part runs only when named

