"""The feature-based evaluation protocols, run on cached features, each reported as data.

A protocol that cannot produce a number on these features (NaN features, one class, k beyond
the bank, ...) reports `NA(<reason>)` for its metrics instead of stopping the others.
"""
from contextlib import suppress
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor

from benchmark.evaluation.cluster import (
    cluster_scores,
    plot_tsne,
    select_classes,
    tsne_embedding,
)
from benchmark.evaluation.knn import KNN_K_RULE, knn_k_for, knn_predict
from benchmark.evaluation.linear_fast import train_linear_probe
from benchmark.evaluation.topk import topk_accuracy
from benchmark.names import ACCURACY, CLUSTER, FEATURE_PROTOCOLS, protocol_name


# The fast probe's fixed schedule (train_linear_probe's defaults), recorded with its results:
# no model selection, the last epoch's test accuracy is the result.
LINEAR_FAST_SCHEDULE = dict(lr=0.1, batch_size=256, weight_decay=0.0, schedule='cosine',
                            selection='none (last epoch)')


def _guard(settings: dict, names: Sequence[str], compute: Callable[[], dict]) -> dict:
    """{'settings', 'metrics'}, each metric NA(reason) when the protocol cannot run."""
    try:
        metrics = compute()
    except ValueError as err:
        reason = str(err).splitlines()[0].replace('(', '[').replace(')', ']')
        metrics = {name: f'NA({reason})' for name in names}
    return dict(settings=settings, metrics=metrics)


def run_protocols(train: tuple, test: tuple, num_classes: int,
                  protocols: Sequence[str] = ('knn', 'linear_fast', 'cluster'),
                  knn_k: Optional[int] = None, knn_temperature: float = 0.1,
                  linear_epochs: int = 100,
                  cluster_classes: int = 10, cluster_per_class: int = 1000, seed: int = 0,
                  figure_path: Optional[str] = None, title: str = '',
                  device: Optional[Union[str, torch.device]] = None) -> Dict[str, dict]:
    """Run the requested protocols on (features, labels) of a train and a test split.

    Args:
        train: (features (N, C), labels (N,)) of the split the probes fit / kNN searches.
        test: (features (M, C), labels (M,)) scored by kNN and the probe.
        num_classes: Number of classes of the evaluation data.
        protocols: Subset of FEATURE_PROTOCOLS ('tsne' means 'cluster_tsne'). 'cluster' computes the indices on the training
            features of the paper's Fig. 3 subset; 'cluster_tsne' adds the same indices on its 2-D
            t-SNE embedding and draws the figure to `figure_path`.
        knn_k, knn_temperature: Weighted kNN settings (InstDisc: 200, 0.1). None: k by the
            rule of `knn_k_for` (200 on the paper's data, less where a class has fewer than
            500 training images), recorded with the rule in the settings.
        linear_epochs: Epochs of the fast linear probe.
        cluster_classes, cluster_per_class: The Fig. 3 subset (10 x 1,000).
        seed: Seed of the probe, the subset, k-means and t-SNE.
        figure_path: Where the t-SNE PNG goes ('cluster_tsne' only).
        title: Figure title prefix.
        device: Where kNN searches and the fast linear probe trains; None keeps each one's
            default (kNN: a GPU when torch sees one; the probe: the CPU). The cluster indices
            and t-SNE run on the CPU (scikit-learn) whatever it says.

    Returns:
        Protocol name -> {'settings': ..., 'metrics': ...}.
    """
    protocols = [protocol_name(p) for p in protocols]  # 'tsne' -> 'cluster_tsne'
    unknown = set(protocols) - set(FEATURE_PROTOCOLS)
    if unknown:
        raise ValueError(f'unknown protocols {sorted(unknown)}; choose from {list(FEATURE_PROTOCOLS)}')
    (x_tr, y_tr), (x_te, y_te) = train, test
    out: Dict[str, dict] = {}
    if 'knn' in protocols:
        settings = dict(k=knn_k, temperature=knn_temperature, split='train->test')
        if knn_k is None:
            settings['k_rule'] = KNN_K_RULE
            with suppress(ValueError):  # no labels: raised again inside the guard, NA
                settings['k'] = knn_k_for(y_tr)
        out['knn'] = _guard(settings, ACCURACY,
                            lambda: topk_accuracy(knn_predict(
                                x_tr, y_tr, x_te, num_classes, settings['k'] or knn_k_for(y_tr),
                                knn_temperature, device=device), y_te))
    if 'linear_fast' in protocols:
        out['linear_fast'] = _guard(dict(epochs=linear_epochs, seed=seed, features='cached',
                                         **LINEAR_FAST_SCHEDULE), ACCURACY,
                                    lambda: _linear(x_tr, y_tr, x_te, y_te, num_classes,
                                                    linear_epochs, seed, device))
    if 'cluster' in protocols or 'cluster_tsne' in protocols:
        subset = select_classes(_np(y_tr), cluster_classes, cluster_per_class, seed)
        settings = dict(classes=cluster_classes, per_class=cluster_per_class, split='train',
                        seed=seed)
        feats, labels = _np(x_tr)[subset], _np(y_tr)[subset]
        if 'cluster' in protocols:
            out['cluster'] = _guard(settings, CLUSTER, lambda: cluster_scores(feats, labels, seed))
        if 'cluster_tsne' in protocols:
            out['cluster_tsne'] = _guard(dict(settings, embedding='tsne-2d', figure=figure_path), CLUSTER,
                                         lambda: _tsne(
                feats, labels, seed, figure_path, title))
    return out


def _np(x) -> np.ndarray:
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


def _linear(x_tr, y_tr, x_te, y_te, num_classes: int, epochs: int, seed: int,
            device: Optional[Union[str, torch.device]] = None) -> dict:
    res = train_linear_probe(x_tr, y_tr, x_te, y_te, num_classes, epochs=epochs, seed=seed,
                             lr=LINEAR_FAST_SCHEDULE['lr'],
                             batch_size=LINEAR_FAST_SCHEDULE['batch_size'],
                             weight_decay=LINEAR_FAST_SCHEDULE['weight_decay'], device=device)
    return {k: res[k] for k in ('top1', 'top5') if k in res}


def _tsne(feats: np.ndarray, labels: np.ndarray, seed: int, path: Optional[str], title: str) -> dict:
    embedding = tsne_embedding(feats, seed)
    scores = cluster_scores(embedding, labels, seed)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        plot_tsne(embedding, labels, title, path, scores=scores)
    return scores
