"""topk_accuracy: the accuracy every protocol reports, against a brute-force loop."""
import numpy as np
import pytest
import torch

from benchmark.evaluation.topk import topk_accuracy


def _naive(scores, labels, k):
    hits = 0
    for row, label in zip(scores.tolist(), labels.tolist()):
        ranked = sorted(range(len(row)), key=lambda c: -row[c])
        hits += label in ranked[:k]
    return 100.0 * hits / len(labels)


def test_matches_bruteforce_on_random_scores():
    rng = np.random.default_rng(0)
    scores, labels = rng.normal(size=(50, 7)), rng.integers(0, 7, size=50)
    result = topk_accuracy(scores, labels, topk=(1, 2, 5))
    assert set(result) == {'top1', 'top2', 'top5'}
    for k in (1, 2, 5):
        assert result[f'top{k}'] == pytest.approx(_naive(scores, labels, k), abs=1e-12)
    assert 0 < result['top1'] < result['top2'] < result['top5'] < 100
    # torch tensors (and float32 logits) give the same numbers
    assert topk_accuracy(torch.from_numpy(scores).float(), torch.from_numpy(labels),
                         topk=(1, 2, 5)) == pytest.approx(result)


def test_hand_computed_case():
    scores = [[0.9, 0.05, 0.05], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7], [0.2, 0.3, 0.5]]
    labels = [0, 2, 0, 1]
    # top1: rows 0 only -> 25%; top2: rows 0, 1, 3 (row 2's label is last) -> 75%
    assert topk_accuracy(np.array(scores), np.array(labels), topk=(1, 2)) == \
        {'top1': 25.0, 'top2': 75.0}


def test_k_larger_than_classes_is_skipped():
    scores, labels = np.eye(3), np.array([0, 1, 2])
    assert topk_accuracy(scores, labels) == {'top1': 100.0}  # top5 needs >= 5 classes
    assert topk_accuracy(scores, labels, topk=(5,)) == {}


def test_counts_by_hand_default_topk_and_tensors():
    scores = torch.tensor([[0.9, 0.5, 0.1, 0.0, 0.0, 0.0],    # true 0: top-1 hit
                           [0.1, 0.9, 0.8, 0.7, 0.6, 0.5],    # true 5: rank 5, top-5 hit only
                           [0.9, 0.8, 0.7, 0.6, 0.5, 0.0],    # true 5: rank 6, miss
                           [0.0, 0.0, 0.3, 0.9, 0.0, 0.0]])   # true 2: rank 2
    labels = torch.tensor([0, 5, 5, 2])
    assert topk_accuracy(scores, labels) == pytest.approx({'top1': 25.0, 'top5': 75.0})
    assert topk_accuracy(scores.numpy(), labels.numpy(), topk=(1, 2)) == \
        pytest.approx({'top1': 25.0, 'top2': 50.0})
    assert set(topk_accuracy(scores[:, :4], torch.tensor([0, 1, 1, 2]))) == {'top1'}


@pytest.mark.parametrize('scores,labels', [
    (np.zeros(4), np.zeros(4)),  # scores not (N, C)
    (np.zeros((4, 3)), np.zeros(3)),  # labels of another length
    (np.zeros((4, 3)), np.zeros((4, 1))),  # labels not (N,)
    (np.zeros((0, 3)), np.zeros(0)),  # nothing to score
])
def test_bad_shapes_raise_one_line(scores, labels):
    with pytest.raises(ValueError, match=r'^topk_accuracy: need scores \(N, C\) and labels \(N,\) '
                                         r'with N > 0, got [^\n]*$'):
        topk_accuracy(scores, labels)
