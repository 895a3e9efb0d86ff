"""ProgressHook: the run's epoch, iteration, time per epoch and ETA, on the console and in
``<work dir>/progress.json``.

One line at the end of every epoch and, within a long epoch, at most one every `interval_s`
seconds (default 30)::

    epoch 3/30 iter 66/660 · 4.8 s/epoch · ETA 2m10s

The times are wall-clock times of this process's training so far (the iterations and
everything between them: epoch-end monitors, checkpoints), so the ETA counts what the run will
really take; before the first line nothing is measured yet. The same numbers go to
``progress.json`` (written atomically, rank 0 only), which a suite reads to show its runs::

    {"phase": "training", "epoch": 3, "max_epochs": 30, "iter": 66, "max_iters": 660,
     "s_per_epoch": 4.8, "eta_s": 130.0, "train_s": 14.4, "updated": 1764000000.0}

``phase`` is 'training' while the loop runs and 'trained' after its last iteration (the
evaluation after training may follow in the same process). ``tools/train.py`` registers the
hook on every run (``runner.register_hook``); it is not a config key, so it changes no config's
identity. It reads no random numbers and touches no weights.
"""
from __future__ import annotations

import json
import os.path as osp
import time
from typing import Callable, Optional

from mmengine.hooks import Hook

from benchmark import dist
from benchmark.atomic_io import atomic_write_text

PROGRESS_FILE = 'progress.json'  # in the work dir


def duration(seconds: float) -> str:
    """'42s', '3m05s', '1h02m05s'."""
    hours, rest = divmod(int(round(max(seconds, 0))), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f'{hours}h{minutes:02d}m{secs:02d}s'
    return f'{minutes}m{secs:02d}s' if minutes else f'{secs}s'


def progress_line(state: dict) -> str:
    """'epoch 3/30 iter 66/660 · 4.8 s/epoch · ETA 2m10s' (the ETA part once measured)."""
    text = f"epoch {state['epoch']}/{state['max_epochs']} iter {state['iter']}/{state['max_iters']}"
    if state.get('s_per_epoch') is not None:
        text += f" · {state['s_per_epoch']:.1f} s/epoch · ETA {duration(state['eta_s'])}"
    return text


def read_progress(work_dir: str) -> Optional[dict]:
    """The run's progress.json, or None (none yet, or unreadable)."""
    try:
        with open(osp.join(work_dir, PROGRESS_FILE), encoding='utf-8') as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


class ProgressHook(Hook):
    """Print and store the run's progress (see the module docstring).

    Args:
        interval_s: Within an epoch, at most one line per this many seconds.
        clock: Monotonic seconds (tests pass a fake).
    """

    priority = 'LOW'  # after the epoch's monitors (NORMAL), before the checkpoint (VERY_LOW)

    def __init__(self, interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self.start = self.last = 0.0
        self.start_iter = 0

    def before_train(self, runner) -> None:
        self.start = self.last = self.clock()
        self.start_iter = runner.iter  # a resumed run measures from where it resumed
        self._write(runner, self.state(runner, runner.iter, runner.epoch + 1))

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self.clock() - self.last >= self.interval_s:  # runner.iter counts this one next
            self._report(runner, self.state(runner, runner.iter + 1, runner.epoch + 1))

    def after_train_epoch(self, runner) -> None:
        self._report(runner, self.state(runner, runner.iter, runner.epoch + 1))

    def after_train(self, runner) -> None:
        state = self.state(runner, runner.iter, runner.epoch, phase='trained')
        if dist.is_main():
            runner.logger.info(f"trained: {state['epoch']} epochs, "
                               f"{duration(state['train_s'])} in this process")
        self._write(runner, state)

    def state(self, runner, done: int, epoch: int, phase: str = 'training') -> dict:
        """The progress after `done` iterations, in epoch `epoch` (1-based)."""
        elapsed = self.clock() - self.start
        max_iters, max_epochs = int(runner.max_iters), int(runner.max_epochs)
        state = dict(phase=phase, epoch=int(epoch), max_epochs=max_epochs, iter=int(done),
                     max_iters=max_iters, s_per_epoch=None, eta_s=None,
                     train_s=round(elapsed, 3), updated=time.time())
        measured = done - self.start_iter
        if measured > 0 and elapsed > 0:
            per_iter = elapsed / measured
            state['s_per_epoch'] = round(per_iter * max_iters / max(max_epochs, 1), 3)
            state['eta_s'] = round(per_iter * max(max_iters - done, 0), 3)
        return state

    def _report(self, runner, state: dict) -> None:
        self.last = self.clock()
        if dist.is_main():
            runner.logger.info(progress_line(state))
        self._write(runner, state)

    @staticmethod
    def _write(runner, state: dict) -> None:
        if dist.is_main():
            atomic_write_text(osp.join(runner.work_dir, PROGRESS_FILE),
                              json.dumps(state, sort_keys=True) + '\n')
