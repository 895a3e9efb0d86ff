"""What the monitors run during training share: their fixed subsets and how an epoch is logged."""
from typing import Dict

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


def fixed_subset(rng: np.random.Generator, length: int, size: int) -> np.ndarray:
    """`min(size, length)` distinct indices of range(length), sorted (dataset order)."""
    return np.sort(rng.choice(length, size=min(size, length), replace=False))
