"""The fast linear probe: separable data, chance level on shuffled labels, determinism."""
import numpy as np
import pytest
import torch

from benchmark.evaluation.linear_fast import standardize, train_linear_probe


def blobs(n, num_classes, dim=64, distance=10.0, scale=1.0, seed=0):
    """Gaussian blobs with far-apart centres, offset and scaled like a backbone's features."""
    centres = np.random.default_rng(123).normal(size=(num_classes, dim)) * distance
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, n)
    features = (centres[labels] + rng.normal(size=(n, dim))) * scale + 3.0
    return features.astype(np.float32), labels


def test_separable_blobs_reach_100_percent():
    x_train, y_train = blobs(600, 6, scale=50.0)
    x_test, y_test = blobs(300, 6, scale=50.0, seed=1)
    result = train_linear_probe(x_train, y_train, x_test, y_test, num_classes=6, epochs=10)
    assert result['top1'] == 100.0 and result['top5'] == 100.0
    assert result['epochs'] == 10 and result['lr'] == 0.1


def test_shuffled_labels_give_chance_level():
    x_train, _ = blobs(800, 4)
    x_test, _ = blobs(2000, 4, seed=1)
    rng = np.random.default_rng(7)
    result = train_linear_probe(x_train, rng.integers(0, 4, 800), x_test,
                                rng.integers(0, 4, 2000), num_classes=4, epochs=10)
    assert abs(result['top1'] - 25.0) < 5.0  # 5 is ~5 standard errors of 2,000 test samples
    assert 'top5' not in result  # only 4 classes


def test_deterministic_for_a_seed():
    x_train, y_train = blobs(500, 5, distance=0.3)  # overlapping, so the optimum is not trivial
    x_test, y_test = blobs(200, 5, distance=0.3, seed=1)
    args = (x_train, y_train, x_test, y_test, 5)
    first = train_linear_probe(*args, epochs=5, seed=3)
    assert train_linear_probe(*args, epochs=5, seed=3) == first
    torch_args = [torch.from_numpy(a) for a in args[:4]]
    assert train_linear_probe(*torch_args, 5, epochs=5, seed=3) == first
    assert train_linear_probe(*args, epochs=5, seed=4)['train_loss'] != first['train_loss']


def test_standardize_uses_train_statistics():
    train = torch.tensor([[1.0, 5.0], [3.0, 5.0]])
    std_train, std_test = standardize(train, torch.tensor([[5.0, 6.0]]))
    torch.testing.assert_close(std_train, torch.tensor([[-1.0, 0.0], [1.0, 0.0]]),
                               atol=1e-5, rtol=0)
    torch.testing.assert_close(std_test, torch.tensor([[3.0, 1e6]]), rtol=1e-4, atol=0)


def test_bad_inputs_raise():
    x, y = blobs(50, 3)
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match='NaN or inf'):
        train_linear_probe(bad, y, x, y, num_classes=3, epochs=1)
    with pytest.raises(ValueError, match='labels must lie in'):
        train_linear_probe(x, y, x, y, num_classes=2, epochs=1)
    with pytest.raises(ValueError, match='dimension'):
        train_linear_probe(x, y, x[:, :10], y, num_classes=3, epochs=1)
