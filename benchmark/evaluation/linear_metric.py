"""Top-1 / top-5 accuracy of a classifier's logits as an mmengine metric (the val loop's)."""
from typing import Any, Dict, List, Sequence

import torch
from mmengine.evaluator import BaseMetric
from mmengine.registry import METRICS

from benchmark.evaluation.topk import topk_accuracy


@METRICS.register_module()
class LinearAccuracy(BaseMetric):
    """Top-k accuracy in percent over the whole evaluation split.

    The model's `predict` output is the logits of a batch, shape (B, C); mmengine's evaluator
    hands them over row by row. One result per sample is kept, so mmengine's `collect_results`
    gathers every process's shard and drops the distributed sampler's padding.

    Args:
        topk: The k values to report ('top1', 'top5'); those above C are skipped.
        collect_device: 'cpu' or 'gpu', where the results of the processes are gathered.
        prefix: Prefix of the metric names in logs ('linear/top1').
    """

    default_prefix = 'linear'

    def __init__(self, topk: Sequence[int] = (1, 5), collect_device: str = 'cpu',
                 prefix: str = None) -> None:
        if isinstance(topk, str) or not topk or not all(
                isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in topk):
            raise ValueError(f'topk must be a non-empty list of integers >= 1, got {topk!r}')
        if collect_device not in ('cpu', 'gpu'):
            raise ValueError(f"collect_device must be 'cpu' or 'gpu', got {collect_device!r}")
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.topk = tuple(topk)

    def process(self, data_batch: Any, data_samples: Sequence) -> None:
        """Store (logits (C,), label) of each sample of the batch, on CPU."""
        labels = torch.as_tensor(data_batch['data_samples']).view(-1)  # (B,)
        if len(data_samples) != len(labels):
            raise ValueError(f'LinearAccuracy: {len(data_samples)} predictions for '
                             f'{len(labels)} labels; the model must return logits (B, C)')
        for logits, label in zip(data_samples, labels):
            self.results.append((torch.as_tensor(logits).detach().float().cpu(), int(label)))

    def compute_metrics(self, results: List[tuple]) -> Dict[str, float]:
        """{'top1': ..., 'top5': ...} in percent over all collected samples."""
        scores = torch.stack([logits for logits, _ in results])  # (N, C)
        labels = torch.tensor([label for _, label in results])  # (N,)
        return topk_accuracy(scores, labels, self.topk)
