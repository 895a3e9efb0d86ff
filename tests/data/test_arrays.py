"""CIFAR-10/100 python batches and the bundled digits, read exactly."""
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmark.data import (
    CIFAR10,
    CIFAR100,
    Digits,
)


def _raw_pickle(path: Path) -> dict:
    # The CIFAR web page's recipe: bytes keys, as the official Python 2 files give.
    with open(path, 'rb') as f:
        return pickle.load(f, encoding='bytes')


@pytest.mark.parametrize('cls, folder, train_files, label_key, num_classes', [
    (CIFAR10, 'cifar-10-batches-py', [f'data_batch_{i}' for i in range(1, 6)], b'labels', 10),
    (CIFAR100, 'cifar-100-python', ['train'], b'fine_labels', 100),
])
def test_cifar_labels_and_pixels_equal_pickles(cifar, cls, folder, train_files, label_key,
                                               num_classes):
    entries = [_raw_pickle(Path(cifar, folder, name)) for name in train_files]
    data = np.concatenate([e[b'data'] for e in entries])
    labels = [label for e in entries for label in e[label_key]]
    ds = cls(cifar, split='train', view=None)
    assert ds.targets == labels and len(ds) == len(data) and len(ds.classes) == num_classes
    for i in (0, len(ds) - 1):
        sample = ds[i]
        assert sample['data_samples'] == labels[i]
        np.testing.assert_array_equal(np.asarray(sample['inputs']),
                                      data[i].reshape(3, 32, 32).transpose(1, 2, 0))
    # data_root may also be the batches folder itself
    assert cls(str(Path(cifar, folder)), split='test', view=None).targets == \
        cls(cifar, split='val', view=None).targets


def test_cifar_fakes_read_by_torchvision_as_by_us(cifar, monkeypatch):
    import torchvision.datasets.cifar as tv_cifar
    monkeypatch.setattr(tv_cifar, 'check_integrity', lambda *args: True)  # fakes fail the md5s
    for ours, theirs in ((CIFAR10, tv_cifar.CIFAR10), (CIFAR100, tv_cifar.CIFAR100)):
        a, b = ours(cifar, split='test', view=None), theirs(cifar, train=False)
        assert a.classes == b.classes and a.targets == b.targets
        np.testing.assert_array_equal(a.data, b.data)
    assert CIFAR10(cifar, view=None).classes[:2] == ['airplane', 'automobile']


def test_cifar_test_view_values(cifar):
    raw = CIFAR10(cifar, split='test', view=None)[0]['inputs']
    out = CIFAR10(cifar, split='test', input_size=32, view='test')[0]['inputs']
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    assert out.shape == (3, 32, 32)
    # 32 -> resize 37 -> center crop 32 is not the identity, so compare only the mean colour
    expected = torch.from_numpy(np.array(raw)).float().mean((0, 1)) / 255
    torch.testing.assert_close((out * std[:, None, None] + mean[:, None, None]).mean((1, 2)),
                               expected, atol=0.03, rtol=0)


def test_digits_split_is_stratified_and_deterministic():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    train, val = Digits(split='train', view=None), Digits('ignored', split='val', view=None)
    assert (len(train), len(val)) == (1437, 360) and train.classes == [str(i) for i in range(10)]
    stratified = np.abs(np.bincount(val.targets) - 0.2 * np.bincount(digits.target))
    assert (stratified < 1).all()
    _, val_idx = train_test_split(np.arange(1797), test_size=0.2, random_state=0,
                                  stratify=digits.target)
    assert val.targets == digits.target[val_idx].tolist()
    image = np.asarray(val[5]['inputs'])
    assert image.shape == (8, 8, 3) and image.dtype == np.uint8
    np.testing.assert_array_equal(image[..., 1], np.round(digits.images[val_idx[5]] * 255 / 16))
    assert Digits(split='train', view=None).targets == train.targets
    assert Digits(split='val', input_size=32, view='test')[0]['inputs'].shape == (3, 32, 32)
