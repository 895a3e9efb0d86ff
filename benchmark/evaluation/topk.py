"""Top-k accuracy of class scores: the one accuracy every protocol (kNN, probes) reports."""
from typing import Dict, Sequence, Union

import numpy as np
import torch
from torch import Tensor

ArrayLike = Union[np.ndarray, Tensor]


def topk_accuracy(scores: ArrayLike, labels: ArrayLike,
                 topk: Sequence[int] = (1, 5)) -> Dict[str, float]:
    """Top-k accuracy of class scores, in percent.

    Args:
        scores: Shape (N, C), higher is better (kNN scores or logits).
        labels: Shape (N,), true classes.
        topk: The k values to report; those larger than C are skipped.

    Returns:
        {'top1': 93.1, 'top5': 99.0, ...}, each in [0, 100].
    """
    scores, labels = torch.as_tensor(scores).cpu(), torch.as_tensor(labels).cpu().long()
    if scores.ndim != 2 or labels.shape != (scores.shape[0],) or scores.shape[0] == 0:
        raise ValueError(f'topk_accuracy: need scores (N, C) and labels (N,) with N > 0, got '
                         f'{tuple(scores.shape)} and {tuple(labels.shape)}')
    ks = [k for k in topk if k <= scores.shape[1]]
    if not ks:
        return {}
    ranked = scores.topk(max(ks), dim=1).indices  # N x max(k)
    hits = ranked == labels[:, None]
    return {f'top{k}': 100.0 * hits[:, :k].any(dim=1).double().mean().item() for k in ks}
