"""Fault injection for the fault campaign and the tests: kill this process at a chosen moment.

Real SIGKILLs (no cleanup, no flush), the way a node failure or the OOM killer ends a run.
"""
import os
import signal
import threading
from typing import Optional

import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from benchmark import dist


def check_rank(rank: int) -> None:
    if rank < 0:
        raise ValueError(f'rank must be >= 0, got {rank}')


def _kill_now() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@HOOKS.register_module()
class KillHook(Hook):
    """SIGKILL this process (on ``rank``) at one moment of training.

    Args:
        at_iter: Kill after this iteration (1-based), after every other hook of it ran
            (so right after a checkpoint saved at that iteration).
        during_save: Kill while the n-th checkpoint (1-based) is being written, ``delay_s``
            after its writing started.
        delay_s: See ``during_save``.
        during_eval: Kill once training has ended, while the evaluation runs.
        rank: Process to kill.
        signal_at_iter: Instead of killing, send ``sig`` to the process as iteration
            ``signal_at_iter`` starts (a scheduler's pre-emption).
        sig: Signal name for ``signal_at_iter``.
    """

    priority = 'LOWEST'

    def __init__(self, at_iter: Optional[int] = None, during_save: Optional[int] = None,
                 delay_s: float = 0.0, during_eval: bool = False, rank: int = 0,
                 signal_at_iter: Optional[int] = None, sig: str = 'SIGTERM') -> None:
        for name, value in (('at_iter', at_iter), ('during_save', during_save),
                            ('signal_at_iter', signal_at_iter)):
            if value is not None and value < 1:
                raise ValueError(f'KillHook: {name} must be >= 1 or None, got {value}')
        check_rank(rank)
        if delay_s < 0:
            raise ValueError(f'KillHook: delay_s must be >= 0, got {delay_s}')
        self.at_iter, self.during_save, self.delay_s = at_iter, during_save, delay_s
        self.during_eval, self.rank = during_eval, rank
        if sig not in signal.Signals.__members__:
            raise ValueError(f"sig: unknown signal {sig!r}; valid: "
                             f"{', '.join(map(repr, signal.Signals.__members__))}")
        self.signal_at_iter, self.sig = signal_at_iter, getattr(signal, sig)
        self._saves = 0

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        if self._mine() and self.signal_at_iter is not None \
                and runner.iter + 1 == self.signal_at_iter:
            os.kill(os.getpid(), self.sig)  # arrives during this step, as a scheduler's would

    def _mine(self) -> bool:
        return dist.rank() == self.rank

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if self._mine() and self.at_iter is not None and runner.iter + 1 == self.at_iter:
            _kill_now()

    def before_save_checkpoint(self, runner, checkpoint) -> None:
        self._saves += 1
        if self._mine() and self.during_save == self._saves:
            threading.Timer(self.delay_s, _kill_now).start()

    def after_train(self, runner) -> None:
        if self._mine() and self.during_eval:
            threading.Timer(self.delay_s, _kill_now).start()


@HOOKS.register_module()
class PoisonHook(Hook):
    """Fill one weight of the model with NaN before iteration ``at_iter`` (on ``rank``)."""

    priority = 'LOWEST'

    def __init__(self, at_iter: int, rank: int = 0) -> None:
        if at_iter < 1:
            raise ValueError(f'PoisonHook: at_iter must be >= 1, got {at_iter}')
        check_rank(rank)
        self.at_iter, self.rank = at_iter, rank

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        if dist.rank() == self.rank and runner.iter + 1 == self.at_iter:
            model = dist.unwrap(runner.model)
            with torch.no_grad():
                next(model.backbone.parameters()).fill_(float('nan'))
