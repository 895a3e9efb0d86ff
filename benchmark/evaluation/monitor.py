"""What the monitors run during training share: their fixed subsets, how an epoch is logged
and how their arguments are refused."""
from typing import Any, Dict, Iterable, Tuple

import numpy as np


def log_epoch_metrics(runner, prefix: str, accuracy: Dict[str, float], epoch: int,
                      detail: str) -> Dict[str, float]:
    """Log an epoch's accuracies as `<prefix>/<metric>` scalars (message hub, visualizer by
    epoch) and one log line; return the scalars. Shared by the monitors run during training."""
    scalars = {f'{prefix}/{name}': value for name, value in accuracy.items()}
    for key, value in scalars.items():
        runner.message_hub.update_scalar(key, value)
    runner.visualizer.add_scalars(scalars, step=epoch)
    runner.logger.info(f'{prefix}: epoch {epoch}: ' + '  '.join(
        f'{name} {value:.2f}' for name, value in accuracy.items()) + f' ({detail})')
    return scalars


def refuse_out_of_bounds(owner: str, checks: Iterable[Tuple[str, bool, str, Any]]) -> None:
    """Raise ``ValueError('<owner>: <name> must be <want>, got <value>')`` for the first
    (name, ok, want, value) of `checks` whose `ok` is false: a monitor's arguments, checked in
    its constructor."""
    for name, ok, want, value in checks:
        if not ok:
            raise ValueError(f'{owner}: {name} must be {want}, got {value}')


def fixed_subset(rng: np.random.Generator, length: int, size: int) -> np.ndarray:
    """`min(size, length)` distinct indices of range(length), sorted (dataset order)."""
    return np.sort(rng.choice(length, size=min(size, length), replace=False))
