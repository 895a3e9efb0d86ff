"""The `supervised` protocol: accuracy of a supervised model's own trained classifier.

The paper's supervised rows report the top-1 of the supervised network itself on the
validation split, not of a probe trained on its features. This protocol reads the same
validation images in the same test view as the feature protocols, runs the frozen backbone
(eval mode, each process its shard, as `extract_features` does) and applies the trained
classifier on rank 0, in float64 on the CPU.
"""
import copy
from typing import Dict, Optional

import torch
from mmengine.registry import DATASETS
from torch import Tensor, nn

from benchmark import dist
from benchmark.data.eval_input import EVAL_VIEW
from benchmark.evaluation.features import extract_features
from benchmark.evaluation.topk import topk_accuracy
from benchmark.names import ACCURACY

SETTINGS = dict(split='val', head='trained classifier', view=EVAL_VIEW)


def eval_split(dataset_cfg: dict, split: str):
    """The `split` of the evaluation data in the deterministic test view, as the feature
    protocols read it (the data's bad_data policy kept)."""
    cls = DATASETS.get(dataset_cfg['type'])
    cls.check_root(dataset_cfg['data_root'], split)
    policy = {'bad_data': dataset_cfg['bad_data']} if 'bad_data' in dataset_cfg else {}
    return cls(data_root=dataset_cfg['data_root'], split=split,
               input_size=dataset_cfg['input_size'], view=EVAL_VIEW, **policy)


@torch.no_grad()
def classifier_accuracy(features: Tensor, labels: Tensor,
                        classifier: nn.Module) -> Dict[str, float]:
    """Top-1 (and top-5 when the head has at least 5 classes) of `classifier` on features.

    Args:
        features: (N, C) backbone features, as `extract_features` returns them (not normalised).
        labels: (N,) true classes.
        classifier: The trained head mapping (N, C) to (N, num_classes) logits; a float64 CPU
            copy in eval mode is applied, the module itself is left as it is.

    Returns:
        {'top1': ..., 'top5': ...} in percent.

    Raises:
        ValueError: Non-finite features or logits (a diverged model), or labels the head has
            no class for (data with more classes than the model was trained on).
    """
    features = torch.as_tensor(features).detach().cpu().double()
    labels = torch.as_tensor(labels).detach().cpu().long()
    if not torch.isfinite(features).all():
        raise ValueError('supervised: features contain NaN or inf')
    head = copy.deepcopy(classifier).to(device='cpu', dtype=torch.float64).eval()
    logits = head(features)  # (N, num_classes)
    if not torch.isfinite(logits).all():
        raise ValueError('supervised: logits contain NaN or inf')
    if labels.numel() and (labels.min() < 0 or labels.max() >= logits.shape[1]):
        raise ValueError(f'supervised: labels outside the classifier\'s {logits.shape[1]} '
                         'classes; evaluate on the data the model was trained on')
    return topk_accuracy(logits, labels, topk=(1, 5))


def evaluate_classifier(backbone: nn.Module, classifier: nn.Module, dataset_cfg: dict,
                        batch_size: int = 256, num_workers: int = 0) -> Optional[dict]:
    """The `supervised` protocol on the validation split of `dataset_cfg`.

    Every process must call it (each extracts its shard of the features); rank 0 gets
    {'settings': ..., 'metrics': ...}, the others None. A model whose accuracy cannot be
    computed (see `classifier_accuracy`) gets NA(reason) metrics.
    """
    dataset = eval_split(dataset_cfg, 'val')
    features, labels = extract_features(backbone, dataset, batch_size, num_workers)
    if not dist.is_main():
        return None
    try:
        metrics = classifier_accuracy(features, labels, classifier)
    except ValueError as err:
        reason = str(err).splitlines()[0].replace('(', '[').replace(')', ']')
        metrics = {name: f'NA({reason})' for name in ACCURACY}
    return dict(settings=dict(SETTINGS), metrics=metrics)
