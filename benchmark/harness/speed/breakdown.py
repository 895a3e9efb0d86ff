"""Where a training iteration's time goes, on any device: waiting for the loader, drawing the
views (the model's data preprocessor), the step (forward, backward, optimizer), the hooks after
it, and the rest (host work between these, gaps in which the device waits for the host).

Marks are placed at the iteration's start, around the data preprocessor and at the step's end
(`Marks`, the highest hook priority), and at the iteration's end (the pipeline's lowest-priority
`ThroughputHook`). On a GPU a mark is a CUDA event recorded on the stream, read once after the
timed iterations, so measuring adds no wait for the device; on a CPU it is the host's clock.
Segments are on the device's timeline: ``views`` = preprocessor start to end, ``step`` =
preprocessor end to step end, ``hooks`` = step end to iteration end, ``rest`` = the remainder
of the wall time per iteration (the loader wait is reported beside it, from IterTimerHook).
Where the loop draws the views one batch ahead (`benchmark.engine.prefetch_loop`, on a GPU),
their host work happens while the next batch is taken, so it is counted in the loader wait
(and its operations are not in the counted iteration's; ``prepare``, `PrepareTimer`, is that
part of the wait), their device work runs on a side stream beside the step, and ``views`` is how
long the step's stream waited for them.

Counts: the timed iterations run with torch's sync check in 'warn' on a GPU (each host wait is a
warning, counted); a last iteration after them runs under `DispatchCount` from its batch's
arrival (its aten operations, about one kernel launch each on a GPU, and its host reads).
"""
import statistics
import time
import warnings
from typing import Dict, List, Optional

import torch
from mmengine.hooks import Hook

from benchmark import dist
from benchmark.harness.speed.dispatch import DispatchCount

SEGMENTS = ('wait', 'views', 'step', 'hooks', 'rest')


class Clock:
    """Marks on the device's timeline (CUDA events) or the host's (perf_counter)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == 'cuda'

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def ms(self, start, end) -> float:
        """Milliseconds between two marks (on CUDA, after the device reached both)."""
        return start.elapsed_time(end) if self.cuda else 1e3 * (end - start)


class Marks(Hook):
    """The iteration's start, the preprocessor's start and end, the step's end, per iteration."""

    priority = 'HIGHEST'  # before_train_iter first, after_train_iter first: the step's end

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.rows: List[Dict[str, object]] = []
        self._handles = []

    def before_train(self, runner) -> None:
        pre = dist.unwrap(runner.model).data_preprocessor
        self._handles = [
            pre.register_forward_pre_hook(lambda *_: self._put('views_start')),
            pre.register_forward_hook(lambda *_: self._put('views_end'))]

    def _put(self, name: str) -> None:
        if self.rows:
            self.rows[-1][name] = self.clock.mark()

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.rows.append(dict(start=self.clock.mark()))

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self._put('step_end')

    def end(self, name: str) -> None:
        """The iteration's end (called by the lowest-priority hook)."""
        self._put(name)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


class PrepareTimer:
    """The host time of the preprocessor's `prepare` (the next batch's views drawn one ahead,
    inside the loader wait), call by call: it wraps the instance's method."""

    def __init__(self, pre) -> None:
        self.calls: List[tuple] = []  # (start, seconds)
        real = getattr(pre, 'prepare', None)
        if real is not None:
            def prepare(data):
                start = time.perf_counter()
                try:
                    return real(data)
                finally:
                    self.calls.append((start, time.perf_counter() - start))
            pre.prepare = prepare

    def ms_per_iteration(self, window: tuple, iterations: int) -> float:
        """Milliseconds per iteration of the calls that started inside `window`."""
        inside = [s for start, s in self.calls if window[0] <= start < window[1]]
        return 1e3 * sum(inside) / iterations


def summarise(marks: Marks, first: int, last: int, wall_ms: float,
              waits_ms: List[float], prepare_ms: float = 0.0) -> Dict[str, float]:
    """Means over iterations [first, last): ms per iteration of each segment, and the rest
    (``prepare``: the part of the loader wait spent drawing the next batch's views)."""
    clock, rows = marks.clock, marks.rows[first:last]
    if clock.cuda:
        torch.cuda.synchronize()
    per = {k: [] for k in ('views', 'step', 'hooks')}
    for row in rows:
        if 'views_start' in row:
            per['views'].append(clock.ms(row['views_start'], row['views_end']))
            per['step'].append(clock.ms(row['views_end'], row['step_end']))
        else:  # a model without a preprocessor hook call: the step from the iteration's start
            per['views'].append(0.0)
            per['step'].append(clock.ms(row['start'], row['step_end']))
        per['hooks'].append(clock.ms(row['step_end'], row['end']))
    out = {k: statistics.fmean(v) for k, v in per.items()}
    out['wait'] = statistics.fmean(waits_ms)
    out['prepare'] = prepare_ms
    out['rest'] = max(0.0, wall_ms - sum(out[k] for k in ('wait', 'views', 'step', 'hooks')))
    out['wall'] = wall_ms
    return out


class SyncCount:
    """Count the host's waits for the GPU inside ``with``: torch's sync check in 'warn' mode."""

    def __init__(self, device: torch.device) -> None:
        self.on = device.type == 'cuda'
        self.count: Optional[int] = None

    def __enter__(self):
        if self.on:
            self._caught = warnings.catch_warnings(record=True)
            self._log = self._caught.__enter__()
            warnings.simplefilter('always')
            torch.cuda.set_sync_debug_mode('warn')
        return self

    def __exit__(self, *exc) -> None:
        if self.on:
            torch.cuda.set_sync_debug_mode('default')
            self.count = sum('synchroniz' in str(w.message) for w in self._log)
            self._caught.__exit__(*exc)


class Counted:
    """Run one iteration under `DispatchCount` (entered at its start, left at its end)."""

    def __init__(self) -> None:
        self.count: Optional[DispatchCount] = None

    def start(self) -> None:
        self.count = DispatchCount()
        self.count.__enter__()

    def stop(self) -> Dict[str, object]:
        self.count.__exit__(None, None, None)
        return dict(aten_ops=self.count.ops, host_reads=sum(self.count.host_reads.values()),
                    host_read_ops=dict(self.count.host_reads))


PROFILE_ROWS = 25


class Profiled:
    """Run one iteration under torch.profiler: host and, on CUDA, device time per operation."""

    def __init__(self) -> None:
        self._profiler = None

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile
        cuda = torch.cuda.is_available()
        self._profiler = profile(activities=[ProfilerActivity.CPU] +
                                 [ProfilerActivity.CUDA] * cuda)
        self._profiler.__enter__()

    def stop(self) -> Dict[str, str]:
        """Its tables (text), by self host time and, on CUDA, by self device time."""
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.synchronize()
        self._profiler.__exit__(None, None, None)
        averages = self._profiler.key_averages()
        keys = ('self_cpu_time_total',) + ('self_device_time_total',) * cuda
        return {key: averages.table(sort_by=key, row_limit=PROFILE_ROWS) for key in keys}
