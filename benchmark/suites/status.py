"""The lines a local suite prints while its runs go: each training run's epoch and ETA from its
``progress.json`` (at most every `StatusLines.every_s` seconds), when it has trained, and after
a run that did work the suite's count and ETA (the arithmetic: `outcome.SuiteTimes`)."""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

from benchmark.engine.progress import duration, progress_line, read_progress
from benchmark.suites.outcome import SuiteTimes
from benchmark.suites.plan import RunPlan


def epochs_left(plan: RunPlan) -> int:
    """Epochs the plan still trains (a resume from epoch_<k>.pth: the rest; else all)."""
    if plan.train == 'start':
        return plan.run.max_epochs
    if plan.train == 'resume':
        found = re.fullmatch(r'epoch_(\d+)\.pth', os.path.basename(plan.checkpoint or ''))
        return plan.run.max_epochs - int(found.group(1)) if found else plan.run.max_epochs
    return 0


@dataclass
class RunStatus:
    """A run in a slot, as the status lines see it."""

    plan: RunPlan
    prefix: str  # '[2/4] <run>:'
    phase: str = 'claiming'  # waiting (for another process's claim), training, evaluating
    began: float = 0.0  # monotonic: when it was claimed and planned again
    launched: float = 0.0  # wall time the training started (older progress files are stale)
    progress: Optional[dict] = None
    shown_at: float = float('-inf')
    shown: Tuple[int, int] = (0, 0)  # (epoch, iter) of the last progress line
    started_up: bool = False  # its start-up time is counted
    trained_shown: bool = False


class StatusLines:
    """The status lines of one suite invocation, and what they learn of its times.

    Args:
        times: The suite's times so far.
        out: Where the lines go.
        wants_default: The trainings run the default protocols when they have trained.
    """

    every_s = 30.0  # a training run's progress line at most this often

    def __init__(self, times: SuiteTimes, out: Callable[..., None], wants_default: bool) -> None:
        self.times, self.out, self.wants_default = times, out, wants_default

    def read(self, run: RunStatus) -> None:
        """The run's progress.json, if it is this attempt's: its start-up and epoch times."""
        state = read_progress(run.plan.run.work_dir)
        if state is None or float(state.get('updated') or 0) < run.launched - 1:
            return  # none yet, or the file of an earlier attempt
        run.progress = state
        if not run.started_up and state.get('train_s') is not None:
            run.started_up = True
            late = time.time() - float(state['updated'])
            self.times.learn_startup(time.monotonic() - run.began - late - float(state['train_s']))
        if state.get('s_per_epoch') is not None:
            self.times.learn_epoch(run.plan.run.name, run.plan.run.config,
                                   float(state['s_per_epoch']))

    def remaining(self, run: RunStatus, now: float) -> Optional[float]:
        """Seconds until `run` ends (None: unknown yet)."""
        outside = self.times.outside_mean
        state = run.progress or {}
        spent = now - run.began
        if run.phase == 'training' and state.get('phase') == 'training':
            if state.get('eta_s') is None:
                return None
            late = time.time() - float(state['updated'])
            trained = float(state['train_s']) + late
            return max(float(state['eta_s']) - late, 0.0) + max(outside - (spent - trained), 0.0)
        if run.phase == 'evaluating' or state.get('phase') == 'trained':
            trained = float(state.get('train_s') or 0.0)
            return max(outside - (spent - trained), 0.0)
        total = self.times.run_seconds(run.plan.run.config, epochs_left(run.plan))
        return None if total is None else max(total - spent, 0.0)

    def suite_eta(self, running: Sequence[RunStatus],
                  pending: Sequence[RunPlan]) -> Optional[float]:
        """Seconds until the last run ends, of those `running` and `pending` (None: not known
        yet)."""
        now = time.monotonic()
        remaining = [self.remaining(run, now) for run in running]
        queued = [self.times.run_seconds(p.run.config, epochs_left(p))
                  for p in pending if p.has_work and p.train not in ('queued', 'diverged')]
        return self.times.eta(remaining, queued)

    def show(self, running: Sequence[RunStatus], pending: Sequence[RunPlan]) -> None:
        """A line for each training run whose progress moved on (rate-limited)."""
        now = time.monotonic()
        training = [run for run in running if run.phase == 'training']
        for run in training:  # all first: each line's suite ETA knows every run's progress
            self.read(run)
        for run in training:
            state = run.progress
            if not state:
                continue
            if state.get('phase') == 'trained':
                if not run.trained_shown:
                    run.trained_shown = True
                    text = (f"{run.prefix} trained in {duration(float(state['train_s']))}"
                            + (f" ({state['s_per_epoch']:.1f} s/epoch)"
                               if state.get('s_per_epoch') is not None else ''))
                    self.out(text + ('; evaluating (default protocols)'
                                     if self.wants_default else ''))
                continue
            at = (int(state['epoch']), int(state['iter']))
            if state.get('s_per_epoch') is None or at == run.shown:
                continue
            if now - run.shown_at >= self.every_s:
                run.shown, run.shown_at = at, now
                eta = self.suite_eta(running, pending)
                self.out(f'{run.prefix} {progress_line(state)}'
                         + ('' if eta is None else f' · suite ETA {duration(eta)}'))

    def run_ended(self, finished: int, running: Sequence[RunStatus],
                  pending: Sequence[RunPlan]) -> None:
        """After a run that did work: the suite's count and ETA while runs remain."""
        if not running and not any(p.has_work for p in pending):
            return
        eta = self.suite_eta(running, pending)
        if eta is not None:
            self.out(f'suite: {finished} run(s) done here, '
                     f'{len(running) + len(pending)} to go · ETA {duration(eta)}')
