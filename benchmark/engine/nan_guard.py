"""Stop a run at a non-finite loss, before anything is checkpointed.

The loss terms stay on the device and are checked once per logging interval, at the end of
every epoch and before every checkpoint save: a non-finite loss stops the run within one
logging interval, naming the iteration where it first appeared, and no checkpoint is ever
written after it. Checking every iteration would make the host wait for the device after
every step.
"""
import math
from typing import List, Optional, Tuple

import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from benchmark.dist import any_process, rank
from benchmark.engine.deferred_log import checked_interval, detached, every, host_values, reads_logs


class DivergedError(FloatingPointError):
    """A training loss became NaN or inf; ``elsewhere``: on another process, not this one."""

    def __init__(self, message: str, elsewhere: bool = False) -> None:
        super().__init__(message)
        self.elsewhere = elsewhere


def non_finite_terms(outputs: dict) -> list:
    """Names of the loss terms in ``outputs`` (log variables) that are NaN or inf."""
    bad = []
    for name, value in (outputs or {}).items():
        if torch.is_tensor(value):
            finite = bool(torch.isfinite(value.detach()).all())
        else:
            try:
                finite = math.isfinite(float(value))
            except (TypeError, ValueError):
                continue
        if not finite:
            bad.append(name)
    return bad


@HOOKS.register_module()
class NaNGuardHook(Hook):
    """Raise `DivergedError` naming the iteration, the loss term and the process.

    After each training step the hook keeps the step's log variables where they are (on the
    device); it reads them, in one transfer, every `interval` iterations, at the end of every
    epoch and before every checkpoint is saved (`check`; SafeCheckpointHook calls it before it
    writes). A non-finite term is therefore caught within one logging interval, and always
    before a checkpoint could hold weights trained on it. Every process agrees (one
    all-reduce per check), so all stop together; tools/train.py records the run as diverged.

    Args:
        interval: Iterations between checks; None: the LoggerHook's interval (every iteration
            when the run has no LoggerHook).
    """

    priority = 'HIGHEST'

    def __init__(self, interval: Optional[int] = None) -> None:
        self.interval = checked_interval('NaNGuardHook', interval)
        self._every = interval or 1
        self._pending: List[Tuple[int, int, dict]] = []  # (iteration, epoch, log variables)

    def before_train(self, runner) -> None:
        self._every = every(runner, self.interval)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if outputs:
            self._pending.append((runner.iter + 1, runner.epoch + 1, detached(outputs)))
        if reads_logs(runner, batch_idx, self._every):
            self.check(runner)

    def after_train_epoch(self, runner) -> None:
        self.check(runner)  # HIGHEST: before the epoch's checkpoint and evaluations

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        self.check(runner)

    def after_train(self, runner) -> None:
        self.check(runner)

    def check(self, runner) -> None:
        """Read the loss terms of the iterations since the last check; raise `DivergedError`
        at the first non-finite one on any process."""
        pending, self._pending = self._pending, []
        if not pending:  # the same on every process: no collective needed
            return
        bad = None
        for (iteration, epoch, _), row in zip(pending, host_values([p[2] for p in pending])):
            names = non_finite_terms(row)
            if names:
                bad = (iteration, epoch, names, row)
                break
        if not any_process(bad is not None):
            return
        if bad is None:
            first = pending[0][0]
            raise DivergedError(f'training diverged between iterations {first} and '
                                f'{pending[-1][0]}: a non-finite loss on another process',
                                elsewhere=True)
        iteration, epoch, names, row = bad
        raise DivergedError(f'training diverged at iteration {iteration} (epoch {epoch}): '
                            f'{", ".join(names)} = {row[names[0]]!s:.12} on process {rank()}')
