"""benchmark.evaluation.cluster against scikit-learn called directly, closed cases and the PNG it writes."""
import numpy as np
import pytest
import torch
from PIL import Image
from sklearn.cluster import KMeans
from sklearn.metrics import (
    adjusted_rand_score,
    calinski_harabasz_score,
    davies_bouldin_score,
    normalized_mutual_info_score,
)

from benchmark.evaluation.cluster import (
    cluster_scores,
    plot_tsne,
    select_classes,
    tsne_embedding,
)


def blobs(num_classes=3, per_class=20, dim=8, spread=1.0, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(num_classes, dim)) * 3
    labels = np.repeat(np.arange(num_classes), per_class)
    return centres[labels] + rng.normal(size=(len(labels), dim)) * spread, labels


def test_cluster_scores_equal_sklearn():
    x, y = blobs(spread=2.0)
    scores = cluster_scores(x, y, seed=3)
    clusters = KMeans(n_clusters=3, n_init=10, random_state=3).fit_predict(x)
    assert scores == pytest.approx({
        'davies_bouldin': davies_bouldin_score(x, y),
        'calinski_harabasz': calinski_harabasz_score(x, y),
        'kmeans_nmi': normalized_mutual_info_score(y, clusters),
        'kmeans_ari': adjusted_rand_score(y, clusters),
    }, rel=1e-12)
    assert cluster_scores(torch.from_numpy(x), torch.from_numpy(y), seed=3) == \
        pytest.approx(scores, rel=1e-12)


def test_kmeans_fields_are_one_on_separated_blobs():
    x, y = blobs(num_classes=4, spread=0.01)
    y = np.array([7, 2, 9, 4])[y]  # label values need not be 0..C-1 nor match cluster ids
    scores = cluster_scores(x, y)
    assert scores['kmeans_nmi'] == pytest.approx(1.0)
    assert scores['kmeans_ari'] == pytest.approx(1.0)
    assert scores['davies_bouldin'] < 0.05 and scores['calinski_harabasz'] > 1e4


def test_kmeans_fields_in_range_on_random_labels():
    x, _ = blobs(spread=2.0)
    y = np.random.default_rng(1).integers(0, 3, len(x))
    scores = cluster_scores(x, y)
    assert 0.0 <= scores['kmeans_nmi'] <= 1.0 and -1.0 <= scores['kmeans_ari'] <= 1.0
    assert scores['kmeans_nmi'] < 0.3  # labels unrelated to the blobs


def test_cluster_scores_errors():
    x, y = blobs()
    with pytest.raises(ValueError, match='number of classes'):
        cluster_scores(x, np.zeros(len(x), int))
    x[5, 1] = np.nan
    with pytest.raises(ValueError, match='NaN or inf'):
        cluster_scores(x, y)
    with pytest.raises(ValueError, match='features but'):
        cluster_scores(x[:5], y)


def test_select_classes_counts_classes_and_determinism():
    # 15 classes of sizes 3..17, so some have fewer than per_class samples.
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(15), np.arange(3, 18)))
    idx = select_classes(labels, num_classes=10, per_class=8, seed=5)
    chosen = np.unique(labels[idx])
    counts = np.bincount(labels)
    assert len(chosen) == 10
    assert len(idx) == len(np.unique(idx)) == sum(min(8, counts[c]) for c in chosen)
    assert all((labels[idx] == c).sum() == min(8, counts[c]) for c in chosen)
    assert np.array_equal(idx, select_classes(labels, num_classes=10, per_class=8, seed=5))
    assert not np.array_equal(idx, select_classes(labels, num_classes=10, per_class=8, seed=6))
    everything = select_classes(labels, num_classes=20, per_class=100)
    assert np.array_equal(np.sort(everything), np.arange(len(labels)))  # fewer classes exist


def test_tsne_shape_and_determinism():
    x, _ = blobs(per_class=15)
    emb = tsne_embedding(x, seed=1)
    assert emb.shape == (45, 2) and np.isfinite(emb).all()
    assert np.array_equal(emb, tsne_embedding(x, seed=1))
    assert tsne_embedding(x[:4]).shape == (4, 2)  # perplexity (4 - 1) / 3 = 1 stays valid


def test_plot_tsne_writes_png(tmp_path):
    x, y = blobs(per_class=10)
    rng = np.random.default_rng(0)
    path = plot_tsne(rng.normal(size=(len(y), 2)), y, 'MixCo R18', str(tmp_path / 'tsne.png'),
                     scores={'davies_bouldin': 1.234, 'calinski_harabasz': 56.7})
    assert path == str(tmp_path / 'tsne.png')
    with Image.open(path) as image:
        assert image.format == 'PNG'
        assert image.size[0] > 200 and image.size[1] > 200
