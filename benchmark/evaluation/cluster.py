"""Cluster indices and t-SNE of frozen features (paper section 4.4, Fig. 3).

Davies-Bouldin (lower is better) and Calinski-Harabasz (higher is better) score the features
grouped by their true labels, as in the paper; KMeans NMI/ARI add a label-free view of the same.
"""
from typing import Dict, Optional, Union

import numpy as np
from torch import Tensor

ArrayLike = Union[np.ndarray, Tensor]


def _as_numpy(x: ArrayLike, name: str, ndim: int) -> np.ndarray:
    """A CPU numpy copy of x with the expected number of dimensions and no NaN/inf."""
    x = x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)
    if x.ndim != ndim:
        raise ValueError(f'cluster: {name} must have {ndim} dimension(s), got shape {x.shape}')
    if x.dtype.kind == 'f' and not np.isfinite(x).all():
        raise ValueError(f'cluster: {name} contains NaN or inf ({(~np.isfinite(x)).sum()} values); '
                         'the encoder diverged or the features are corrupt')
    return x


def cluster_scores(features: ArrayLike, labels: ArrayLike, seed: int = 0) -> Dict[str, float]:
    """Cluster indices of features under their true labels, plus KMeans agreement.

    Args:
        features: Shape (N, D), raw (not normalised: the indices are those of the features the
            encoder produces, as in the paper).
        labels: Shape (N,), true classes; at least 2 distinct, fewer than N.
        seed: KMeans random_state.

    Returns:
        davies_bouldin (>= 0, lower better), calinski_harabasz (>= 0, higher better),
        kmeans_nmi in [0, 1] and kmeans_ari in [-1, 1] of KMeans (n_clusters = number of
        classes, n_init=10) against the true labels.

    Raises:
        ValueError: Fewer than 2 classes, as many classes as samples, NaN/inf or bad shapes.
    """
    x = _as_numpy(features, 'features', 2)
    y = _as_numpy(labels, 'labels', 1)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f'cluster: {x.shape[0]} features but {y.shape[0]} labels')
    num_classes = len(np.unique(y))
    if not 2 <= num_classes < x.shape[0]:
        raise ValueError(f'cluster: need 2 <= number of classes < number of samples, got '
                         f'{num_classes} classes for {x.shape[0]} samples')
    from sklearn.cluster import KMeans  # here: half a second that a training process spares
    from sklearn.metrics import (adjusted_rand_score, calinski_harabasz_score,
                                 davies_bouldin_score, normalized_mutual_info_score)
    clusters = KMeans(n_clusters=num_classes, n_init=10, random_state=seed).fit_predict(x)
    return {
        'davies_bouldin': float(davies_bouldin_score(x, y)),
        'calinski_harabasz': float(calinski_harabasz_score(x, y)),
        'kmeans_nmi': float(normalized_mutual_info_score(y, clusters)),
        'kmeans_ari': float(adjusted_rand_score(y, clusters)),
    }


def tsne_embedding(features: ArrayLike, seed: int = 0) -> np.ndarray:
    """2-D t-SNE of features.

    Args:
        features: Shape (N, D), N >= 2.
        seed: TSNE random_state.

    Returns:
        Shape (N, 2). Perplexity is min(30, (N - 1) / 3) so that small sets stay valid
        (sklearn needs perplexity < N).
    """
    x = _as_numpy(features, 'features', 2)
    if x.shape[0] < 2:
        raise ValueError(f'cluster: t-SNE needs at least 2 samples, got {x.shape[0]}')
    perplexity = min(30.0, (x.shape[0] - 1) / 3)
    from sklearn.manifold import TSNE  # as above
    return TSNE(n_components=2, init='pca', perplexity=perplexity,
                random_state=seed).fit_transform(x)


def select_classes(labels: ArrayLike, num_classes: int = 10, per_class: int = 1000,
                   seed: int = 0) -> np.ndarray:
    """Indices of the paper's Fig. 3 subset: random classes, up to per_class samples of each.

    Args:
        labels: Shape (N,), class of each sample.
        num_classes: Classes to draw (the paper: 10, chosen at random); all classes when fewer
            exist.
        per_class: Samples per class (the paper: 1,000); all of a class's samples when it has
            fewer.
        seed: Seed of the draw; the same seed and labels give the same indices.

    Returns:
        Shape (n,), int64 indices into labels, grouped by class (classes ascending) and
        ascending within a class.
    """
    y = _as_numpy(labels, 'labels', 1)
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    chosen = np.sort(rng.choice(classes, size=min(num_classes, len(classes)), replace=False))
    picks = []
    for c in chosen:
        members = np.flatnonzero(y == c)
        picks.append(np.sort(rng.choice(members, size=min(per_class, len(members)),
                                        replace=False)))
    return np.concatenate(picks).astype(np.int64) if picks else np.zeros(0, np.int64)


def plot_tsne(embedding: np.ndarray, labels: ArrayLike, title: str, path: str,
              scores: Optional[Dict[str, float]] = None) -> str:
    """Write a t-SNE scatter plot as PNG, one colour per class.

    Args:
        embedding: Shape (N, 2), from `tsne_embedding`.
        labels: Shape (N,), class of each point (legend entries).
        title: Figure title, e.g. 'MixCo ResNet-18 (Tiny-ImageNet)'.
        path: Output PNG path; its directory must exist.
        scores: Optional `cluster_scores` result; its Davies-Bouldin and Calinski-Harabasz
            indices are appended to the title as in the paper's Fig. 3.

    Returns:
        path.
    """
    # A bare Figure renders with Agg and leaves pyplot's global backend and state untouched,
    # so this works headless (cluster nodes, CI) and inside notebooks alike.
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    xy = _as_numpy(embedding, 'embedding', 2)
    y = _as_numpy(labels, 'labels', 1)
    if scores:
        title = (f'{title}\nDB {scores["davies_bouldin"]:.3f}  '
                 f'CH {scores["calinski_harabasz"]:.1f}')
    fig = Figure(figsize=(7, 7))
    ax = fig.subplots()
    colours = colormaps['tab10' if len(np.unique(y)) <= 10 else 'tab20']
    for i, c in enumerate(np.unique(y)):
        member = y == c
        ax.scatter(xy[member, 0], xy[member, 1], s=4, color=colours(i % colours.N), label=str(c))
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(markerscale=3, fontsize='small', loc='best')
    fig.savefig(path, dpi=100, bbox_inches='tight')
    return path
