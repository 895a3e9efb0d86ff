"""What happened to each run of a suite invocation, the one summary line at its end, and the
suite's remaining time from its runs so far."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from benchmark.suites.spec import Run


@dataclass
class Outcome:
    """What happened to one run in this invocation."""

    run: Run
    state: str  # done, diverged, queued, resumed, started, submitted, failed, interrupted
    ok: bool = True
    log: Optional[str] = None
    failed_evals: Dict[str, str] = field(default_factory=dict)  # evaluation -> log
    job: Optional[str] = None


def summary_line(outcomes: List[Outcome], total: int, interrupted: bool) -> str:
    """'6 runs: 2 done before, 3 started, 1 failed (x); ...' for the end of the output."""
    order = ('done', 'diverged', 'queued', 'resumed', 'started', 'submitted', 'failed',
             'interrupted')
    counts = {s: [o for o in outcomes if o.state == s] for s in order}
    words = {'done': 'done before', 'diverged': 'diverged'}
    parts = [f'{len(items)} {words.get(s, s)}' for s, items in counts.items() if items]
    failed = [o.run.name for o in counts['failed']]
    evals = sum(len(o.failed_evals) for o in outcomes)
    text = f'{total} run(s): ' + ', '.join(parts)
    if failed:
        text += f" (failed: {', '.join(failed)})"
    if evals:
        text += f'; {evals} evaluation(s) failed'
    reached = sum(len(items) for items in counts.values())  # a run passed over: not reached
    if reached < total:
        text += f'; {total - reached} not reached'
    return text + ('; interrupted: rerun the same command to continue' if interrupted else '')


def finish_times(remaining: Sequence[float], queued: Sequence[float], slots: int) -> float:
    """When the last of the runs ends, in seconds from now: the running runs' remaining times,
    then each queued run (in order) in the slot that frees up first."""
    free = sorted(list(remaining) + [0.0] * max(slots - len(remaining), 0))
    for seconds in queued:
        heapq.heapreplace(free, free[0] + seconds)
    return max(free, default=0.0)


class SuiteTimes:
    """The suite's remaining time, from the runs of this invocation so far.

    A run that trains takes its config's measured seconds per epoch (the mean over this
    invocation's runs of that config, else of all runs) times its epochs left, plus the mean
    time of a finished run outside its training (start-up, evaluations). Until some run has
    measured an epoch, nothing is known; until a run has finished, the time outside training
    counts only the start-ups seen so far.
    """

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.per_epoch: Dict[str, Tuple[str, float]] = {}  # run -> (config, its s/epoch)
        self.outside: List[float] = []  # finished runs' seconds outside training
        self.startups: List[float] = []  # seconds from a run's start to its first progress

    def learn_epoch(self, run: str, config: str, seconds: float) -> None:
        """The run's latest measured seconds per epoch (running or finished)."""
        self.per_epoch[run] = (config, seconds)

    def learn_outside(self, seconds: float) -> None:
        self.outside.append(max(seconds, 0.0))

    def seconds_per_epoch(self, config: str) -> Optional[float]:
        own = ([s for c, s in self.per_epoch.values() if c == config]
               or [s for _, s in self.per_epoch.values()])
        return sum(own) / len(own) if own else None

    def learn_startup(self, seconds: float) -> None:
        self.startups.append(max(seconds, 0.0))

    @property
    def outside_mean(self) -> float:
        seen = self.outside or self.startups
        return sum(seen) / len(seen) if seen else 0.0

    def run_seconds(self, config: str, epochs: int) -> Optional[float]:
        """A run still to start: `epochs` to train (0: evaluations only)."""
        if epochs <= 0:
            return self.outside_mean
        per_epoch = self.seconds_per_epoch(config)
        return None if per_epoch is None else per_epoch * epochs + self.outside_mean

    def eta(self, remaining: Sequence[Optional[float]],
            queued: Sequence[Optional[float]]) -> Optional[float]:
        """The suite's ETA in seconds (None while a run's time is unknown)."""
        if any(s is None for s in (*remaining, *queued)):
            return None
        return finish_times(remaining, queued, self.slots)
