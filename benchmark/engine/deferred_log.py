"""Training-step values read from the device once per logging interval, not every iteration.

mmengine's RuntimeInfoHook calls `.item()` on every log variable after every iteration. Each
call waits for the device to finish the step, so the host can no longer queue the next step's
work while the device runs this one. `DeferredRuntimeInfoHook` keeps the step's values on the
device and hands them to the message hub in one transfer at the iterations where something
reads them: when LoggerHook logs, at the end of an epoch, before a checkpoint is saved. The
message hub then holds the same values as with mmengine's hook, in the same order.
"""
from typing import Any, Dict, List, Optional

import torch
from mmengine.hooks import LoggerHook, RuntimeInfoHook
from mmengine.registry import HOOKS
from mmengine.utils import apply_to


def detached(outputs: Optional[dict]) -> Dict[str, Any]:
    """The log variables of a step with their tensors detached (no read, no device work).

    Raises:
        ValueError: A tensor of more than one element (mmengine logs scalars only).
    """
    out = {}
    for name, value in (outputs or {}).items():
        if torch.is_tensor(value):
            if value.numel() != 1:
                raise ValueError(f'log variable {name!r} has {value.numel()} elements; a '
                                 f'training step logs one number per name')
            value = value.detach()
        out[name] = value
    return out


def host_values(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The rows with every tensor replaced by its Python number (as `.item()` gives it), read
    in one transfer per device and dtype; other values as they are."""
    groups: Dict[tuple, list] = {}
    for i, row in enumerate(rows):
        for name, value in row.items():
            if torch.is_tensor(value):
                groups.setdefault((value.device, value.dtype), []).append((i, name))
    out = [dict(row) for row in rows]
    for places in groups.values():
        numbers = torch.stack([rows[i][name].reshape(()) for i, name in places]).tolist()
        for (i, name), number in zip(places, numbers):
            out[i][name] = number
    return out


def logger_interval(runner) -> Optional[int]:
    """The LoggerHook's interval in iterations, or None without a LoggerHook."""
    return next((h.interval for h in runner.hooks if isinstance(h, LoggerHook)), None)


def checked_interval(owner: str, interval: Optional[int]) -> Optional[int]:
    """A hook's `interval` argument (None: the LoggerHook's), refused in one line below 1."""
    if interval is not None and interval < 1:
        raise ValueError(f'{owner}: interval must be >= 1, got {interval}')
    return interval


def every(runner, interval: Optional[int]) -> int:
    """The iterations between a hook's reads: its `interval`, else the LoggerHook's, else 1."""
    return interval or logger_interval(runner) or 1


def reads_logs(runner, batch_idx: int, interval: int) -> bool:
    """Whether LoggerHook may read the training scalars after this iteration: every `interval`
    iterations of the epoch or of the run, and at the end of an epoch."""
    done = batch_idx + 1
    return (done % interval == 0 or (runner.iter + 1) % interval == 0
            or done == len(runner.train_dataloader))


@HOOKS.register_module()
class DeferredRuntimeInfoHook(RuntimeInfoHook):
    """mmengine's RuntimeInfoHook, reading the training step's log variables (loss terms,
    accuracies) from the device once per logging interval instead of after every iteration.

    Iterations that do not log only keep references to the values; the message hub receives
    all of them, in order, when LoggerHook is about to read them (its interval, the end of an
    epoch), before any checkpoint is saved (the checkpoint's message hub is refreshed) and at
    the end of training. Learning rates, times and everything else are mmengine's.

    Args:
        interval: Iterations between reads; None: the LoggerHook's interval (every iteration
            when the run has no LoggerHook, as mmengine's hook).
    """

    def __init__(self, interval: Optional[int] = None) -> None:
        self.interval = checked_interval('DeferredRuntimeInfoHook', interval)
        self._every = interval or 1
        self._pending: List[Dict[str, Any]] = []

    def before_train(self, runner) -> None:
        super().before_train(runner)
        self._every = every(runner, self.interval)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if outputs is not None:
            self._pending.append(detached(outputs))
        if reads_logs(runner, batch_idx, self._every):
            self.flush(runner)

    def flush(self, runner) -> None:
        """Hand every pending value to the message hub (one read from the device)."""
        if not self._pending:
            return
        rows, self._pending = host_values(self._pending), []
        for row in rows:
            for name, value in row.items():
                runner.message_hub.update_scalar(f'train/{name}', value)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self._pending:  # the Runner copied the message hub before calling this hook
            self.flush(runner)
            checkpoint['message_hub'] = apply_to(runner.message_hub.state_dict(),
                                                 lambda x: hasattr(x, 'cpu'), lambda x: x.cpu())

    def after_train_epoch(self, runner) -> None:
        self.flush(runner)

    def after_train(self, runner) -> None:
        self.flush(runner)
        super().after_train(runner)
