"""benchmark.evaluation.knn against a float64 brute-force reference, and lightly's knn_predict."""
import faiss
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import benchmark.evaluation.knn as knn
from benchmark.evaluation.knn import knn_predict


def brute_force_knn(train, labels, test, num_classes, k, temperature):
    """Independent reference: full cosine-similarity matrix in float64 and torch.topk."""
    train = F.normalize(torch.as_tensor(np.asarray(train), dtype=torch.float64), dim=1)
    test = F.normalize(torch.as_tensor(np.asarray(test), dtype=torch.float64), dim=1)
    labels = torch.as_tensor(np.asarray(labels)).long()
    sim = test @ train.T  # N_test x N_train
    top_sim, top_idx = sim.topk(min(k, train.shape[0]), dim=1)  # N_test x k
    scores = torch.zeros(test.shape[0], num_classes, dtype=torch.float64)
    for i in range(test.shape[0]):  # a plain loop, so that it shares no code path with scatter_add
        for s, j in zip(top_sim[i], top_idx[i]):
            scores[i, labels[j]] += torch.exp(s / temperature)
    return scores


def random_data(n_train=60, n_test=25, dim=16, num_classes=5, seed=0):
    rng = np.random.default_rng(seed)
    train = rng.normal(size=(n_train, dim)).astype(np.float32)
    test = rng.normal(size=(n_test, dim)).astype(np.float32)
    labels = rng.integers(0, num_classes, n_train)
    return train, labels, test


def assert_matches_reference(scores, reference):
    assert scores.shape == reference.shape and scores.device.type == 'cpu'
    torch.testing.assert_close(scores, reference, rtol=1e-5, atol=1e-5)
    assert torch.equal(scores.argmax(dim=1), reference.argmax(dim=1))


# k = 1 and 3: fewer than the classes; 20: more than the classes; 200 (the default): more than the
# 60 training samples, so it is clamped and every training sample votes.
@pytest.mark.parametrize('k', [1, 3, 20, 200])
@pytest.mark.parametrize('temperature', [0.1, 0.5])
def test_matches_brute_force(k, temperature):
    train, labels, test = random_data()
    scores = knn_predict(train, labels, test, num_classes=5, k=k, temperature=temperature)
    assert_matches_reference(scores, brute_force_knn(train, labels, test, 5, k, temperature))


def test_k_above_train_size_sums_over_all_training_samples():
    train, labels, test = random_data(n_train=7, num_classes=3)
    scores = knn_predict(train, labels, test, num_classes=3, k=50, temperature=0.2)
    sim = F.normalize(torch.from_numpy(test).double(), dim=1) @ \
        F.normalize(torch.from_numpy(train).double(), dim=1).T  # closed form: all 7 vote
    expected = torch.stack([torch.exp(sim[:, labels == c] / 0.2).sum(1) for c in range(3)], 1)
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-5)


def test_numpy_torch_and_scaled_inputs_agree():
    train, labels, test = random_data()
    reference = knn_predict(train, labels, test, num_classes=5, k=10)
    scale = torch.rand(train.shape[0], 1, dtype=torch.float64) * 100 + 0.01
    as_torch = knn_predict(torch.from_numpy(train).double() * scale, torch.from_numpy(labels),
                           torch.from_numpy(test) * 7.0, num_classes=5, k=10)
    assert as_torch.dtype == torch.float64
    torch.testing.assert_close(as_torch, reference, rtol=1e-5, atol=1e-5)
    assert_matches_reference(reference, brute_force_knn(train, labels, test, 5, 10, 0.1))


def test_ties_across_labels_covered_by_k():
    # Four identical rows with labels 0, 1, 2, 0 and queries along that row: the copies are the
    # top 4 (similarity 1); k = 5 takes all of them, so the result does not depend on how the
    # tie is broken.
    train, labels, test = random_data(n_train=40, n_test=4, num_classes=3)
    train[:3] = train[3]
    labels[:3] = [0, 1, 2]
    labels[3] = 0
    test[:] = train[3] * np.array([[1.0], [2.0], [0.5], [3.0]], dtype=np.float32)
    scores = knn_predict(train, labels, test, num_classes=3, k=5)
    assert_matches_reference(scores, brute_force_knn(train, labels, test, 3, 5, 0.1))
    assert (scores[:, 0] > 2 * np.exp(10) * 0.999).all()  # two copies with label 0 at sim 1


def test_ties_within_one_label_cut_by_k():
    # Six copies with the same label 1, query on them, k = 2: any 2 of the 6 give the same votes.
    train, labels, test = random_data(n_train=40, n_test=3, num_classes=4)
    train[10:16] = train[10]
    labels[10:16] = 1
    test[:] = train[10]
    scores = knn_predict(train, labels, test, num_classes=4, k=2)
    assert_matches_reference(scores, brute_force_knn(train, labels, test, 4, 2, 0.1))
    expected = torch.full((3,), 2 * np.exp(10.0), dtype=torch.float64)  # two votes at sim 1
    torch.testing.assert_close(scores[:, 1], expected, rtol=1e-5, atol=0.0)


def test_faiss_padding_never_votes(monkeypatch):
    # Ask faiss for more neighbours than it has: it pads with index -1. Give the padded slots a
    # high similarity so that a missing mask would change the scores (labels[-1] is valid
    # indexing in torch, so it would not crash).
    train, labels, test = random_data(n_train=8, n_test=5, num_classes=3)
    search = knn._search

    def padded_search(train_, test_, k, device):
        sims, idx = search(train_, test_, k + 4, device)
        assert (idx[:, k:] == -1).all()  # pins faiss's behaviour that the mask guards against
        sims[idx < 0] = 1.0
        return sims, idx

    monkeypatch.setattr(knn, '_search', padded_search)
    scores = knn_predict(train, labels, test, num_classes=3, k=8)
    assert_matches_reference(scores, brute_force_knn(train, labels, test, 3, 8, 0.1))


def test_agrees_with_lightly():
    from lightly.utils.benchmarking import knn_predict as lightly_knn_predict
    train, labels, test = random_data(n_train=80, n_test=30, dim=12, num_classes=6, seed=1)
    scores = knn_predict(train, labels, test, num_classes=6, k=15, temperature=0.1)
    bank = F.normalize(torch.from_numpy(train), dim=1).T  # D x N, as lightly expects
    order = lightly_knn_predict(F.normalize(torch.from_numpy(test), dim=1), bank,
                                torch.from_numpy(labels), 6, knn_k=15, knn_t=0.1)  # N_test x C
    assert torch.equal(order[:, 0], scores.argmax(dim=1))
    ranked = scores.gather(1, order)  # our scores in lightly's order must be non-increasing
    assert (ranked[:, :-1] >= ranked[:, 1:] * (1 - 1e-5)).all()


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize('where', ['train', 'test'])
def test_non_finite_features_raise(bad, where):
    train, labels, test = random_data()
    (train if where == 'train' else test)[3, 2] = bad
    with pytest.raises(ValueError, match=f'{where}_features contains NaN or inf'):
        knn_predict(train, labels, test, num_classes=5)


def test_bad_inputs_raise():
    train, labels, test = random_data()
    with pytest.raises(ValueError, match='train_labels must lie in'):
        knn_predict(train, labels, test, num_classes=3)
    with pytest.raises(ValueError, match='same feature dimension'):
        knn_predict(train, labels, test[:, :5], num_classes=5)
    with pytest.raises(ValueError, match='train_labels must have shape'):
        knn_predict(train, labels[:-1], test, num_classes=5)


def test_use_gpu_without_gpu_falls_back_to_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)  # a machine without one
    train, labels, test = random_data()
    expected = knn_predict(train, labels, test, num_classes=5, k=10, use_gpu=False)
    torch.testing.assert_close(knn_predict(train, labels, test, 5, k=10, use_gpu=True), expected)


@pytest.mark.cuda
@pytest.mark.skipif(faiss.get_num_gpus() == 0, reason='needs a faiss GPU build')
def test_gpu_index_matches_cpu():
    train, labels, test = random_data(n_train=500, n_test=100, dim=32, num_classes=10)
    expected = knn_predict(train, labels, test, num_classes=10, k=50, use_gpu=False)
    scores = knn_predict(torch.from_numpy(train).cuda(), torch.from_numpy(labels).cuda(),
                         torch.from_numpy(test).cuda(), num_classes=10, k=50)
    assert scores.device.type == 'cpu'
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('per_class, expected', [
    ([5000] * 10, 200),           # CIFAR-10: the paper's k
    ([500] * 100, 200),           # CIFAR-100 and Tiny-ImageNet: 500 per class, still 200
    ([1300, 732, 1000], 200),     # ImageNet's smallest class
    ([142, 146, 139, 145], 55),   # digits' training split: floor(0.4 * 139)
    ([499, 600], 199),
    ([2, 1, 7], 1),               # never below 1
])
def test_k_rule_keeps_the_paper_data_at_200_and_a_class_share_below(per_class, expected):
    labels = np.repeat(np.arange(len(per_class)), per_class)
    np.random.default_rng(0).shuffle(labels)
    naive = max(1, min(200, int(np.floor(0.4 * min(per_class)))))
    assert knn.knn_k_for(labels) == knn.knn_k_for(torch.as_tensor(labels)) == naive == expected


def test_k_rule_ignores_classes_absent_from_the_bank_and_refuses_an_empty_one():
    assert knn.knn_k_for(np.array([3] * 50 + [7] * 20)) == 8
    with pytest.raises(ValueError, match='no labels'):
        knn.knn_k_for(np.array([], dtype=np.int64))
