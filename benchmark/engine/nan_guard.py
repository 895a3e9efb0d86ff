"""Stop a run within one iteration of a non-finite loss, before anything is checkpointed."""
import math

import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from benchmark.dist import any_process, rank


DIVERGED_EXIT_CODE = 3  # tools/train.py exits with this after recording the diverged run


class DivergedError(FloatingPointError):
    """A training loss became NaN or inf."""


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

    Runs right after each training step, before any hook can save the model; every process
    agrees (one all-reduce), so all stop together. tools/train.py records the run as diverged.
    """

    priority = 'HIGHEST'

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        bad = non_finite_terms(outputs)
        if not any_process(bool(bad)):
            return
        where = (f"{', '.join(bad)} = {outputs[bad[0]]!s:.12} on process {rank()}" if bad
                 else 'a non-finite loss on another process')
        raise DivergedError(f'training diverged at iteration {runner.iter + 1} '
                            f'(epoch {runner.epoch + 1}): {where}')
