"""The contract faces benchmark.knn and benchmark.cluster (docs/design.md, "Public contracts").

They re-export the code of benchmark.evaluation; external checks call them by these paths, so
they must stay the same objects and give the contract's numbers (float64 brute-force references).
"""
import math

import numpy as np
import pytest
import torch

import benchmark.evaluation.cluster
import benchmark.evaluation.knn
from benchmark.cluster import cluster_scores
from benchmark.knn import knn_predict


def test_faces_are_the_evaluation_objects():
    assert knn_predict is benchmark.evaluation.knn.knn_predict
    assert cluster_scores is benchmark.evaluation.cluster.cluster_scores


def _naive_knn(train, labels, test, num_classes, k, temperature):
    """score[i, c] = sum over the k most cosine-similar training rows j with label c of
    exp(sim_ij / temperature); float64 loops."""
    train = [np.asarray(r, np.float64) / np.linalg.norm(r) for r in train]
    scores = np.zeros((len(test), num_classes))
    for i, q in enumerate(test):
        q = np.asarray(q, np.float64) / np.linalg.norm(q)
        sims = sorted(((float(q @ t), j) for j, t in enumerate(train)), reverse=True)[:k]
        for sim, j in sims:
            scores[i, labels[j]] += math.exp(sim / temperature)
    return scores


@pytest.mark.parametrize('as_torch', [False, True])
def test_knn_predict_matches_bruteforce(as_torch):
    rng = np.random.default_rng(0)
    train = rng.normal(size=(40, 6)) * rng.uniform(0.5, 3, size=(40, 1))  # unnormalised rows
    labels = rng.integers(0, 4, size=40)
    test = rng.normal(size=(7, 6))
    args = (train, labels, test)
    if as_torch:
        args = tuple(torch.from_numpy(a) for a in args)
    scores = knn_predict(*args, num_classes=4, k=5, temperature=0.1)
    assert scores.dtype == torch.float64 and scores.shape == (7, 4)
    np.testing.assert_allclose(scores.numpy(), _naive_knn(train, labels, test, 4, 5, 0.1),
                               rtol=2e-5)
    # each row spends exactly k votes: its sum is the sum of the k largest exp(sim / t)
    assert ((scores > 0).sum(1) <= 5).all()


def _naive_davies_bouldin(x, y):
    classes = sorted(set(y.tolist()))
    centroids = {c: x[y == c].mean(0) for c in classes}
    spread = {c: np.mean([np.linalg.norm(r - centroids[c]) for r in x[y == c]]) for c in classes}
    worst = [max((spread[a] + spread[b]) / np.linalg.norm(centroids[a] - centroids[b])
                 for b in classes if b != a) for a in classes]
    return float(np.mean(worst))


def _naive_calinski_harabasz(x, y):
    classes = sorted(set(y.tolist()))
    mean = x.mean(0)
    between = sum((y == c).sum() * np.sum((x[y == c].mean(0) - mean) ** 2) for c in classes)
    within = sum(np.sum((x[y == c] - x[y == c].mean(0)) ** 2) for c in classes)
    n, k = len(x), len(classes)
    return float(between / (k - 1) / (within / (n - k)))


def test_cluster_scores_match_the_definitions():
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(3), 10)
    centers = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 0.0], [0.0, 8.0, 0.0]])
    x = centers[y] + rng.normal(size=(30, 3))  # three well-separated blobs
    scores = cluster_scores(x, y)
    assert set(scores) == {'davies_bouldin', 'calinski_harabasz', 'kmeans_nmi', 'kmeans_ari'}
    assert scores['davies_bouldin'] == pytest.approx(_naive_davies_bouldin(x, y), rel=1e-9)
    assert scores['calinski_harabasz'] == pytest.approx(_naive_calinski_harabasz(x, y), rel=1e-9)
    assert scores['kmeans_nmi'] == pytest.approx(1.0) and scores['kmeans_ari'] == pytest.approx(1.0)
    # torch input, same numbers
    assert cluster_scores(torch.from_numpy(x), torch.from_numpy(y)) == pytest.approx(scores)
