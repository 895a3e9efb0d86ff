"""Datasets, views, fakes and tools/prepare_data.py on tiny generated data (no network)."""
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.registry import DATASETS
from PIL import Image

from benchmark.datasets import (CIFAR10, CIFAR100, DataRootError, Digits, ImageFolderDataset,
                                TinyImageNet)
from benchmark.fakes import make_fake_cifar, make_fake_image_folder, make_fake_tiny_imagenet
from benchmark.views import build_view

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def tiny(tmp_path_factory) -> str:
    return make_fake_tiny_imagenet(tmp_path_factory.mktemp('tiny'), num_classes=4,
                                   train_per_class=3, val_per_class=2, size=16)


@pytest.fixture(scope='module')
def cifar(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp('cifar')
    make_fake_cifar(root, 'cifar10', train_per_class=2, test_per_class=1)
    return make_fake_cifar(root, 'cifar100', train_per_class=1, test_per_class=1)


def _raw_pickle(path: Path) -> dict:
    # The CIFAR web page's recipe: bytes keys, as the official Python 2 files give.
    with open(path, 'rb') as f:
        return pickle.load(f, encoding='bytes')


# ---------------------------------------------------------------- Tiny-ImageNet

def test_tiny_train_label_is_index_of_wnid_in_sorted_wnids(tiny):
    listed = Path(tiny, 'wnids.txt').read_text().split()
    assert listed != sorted(listed)  # otherwise file order and sorted order agree by chance
    ds = TinyImageNet(tiny, split='train', view=None)
    assert ds.classes == sorted(listed) and ds.metainfo == dict(classes=sorted(listed))
    assert len(ds) == 4 * 3 and sorted(ds.targets) == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    for i, (path, label) in enumerate(ds.samples):
        wnid = Path(path).parts[-3]  # train/<wnid>/images/<file>
        assert ds[i]['data_samples'] == label == sorted(listed).index(wnid)
    image = ds[0]['inputs']
    assert isinstance(image, Image.Image) and image.mode == 'RGB' and image.size == (16, 16)


def test_tiny_val_labels_come_from_annotations(tiny):
    annotations = Path(tiny, 'val', 'val_annotations.txt').read_text()
    rows = [line.split('\t') for line in annotations.splitlines()]
    wnid_of = {row[0]: row[1] for row in rows}
    wnids = sorted(Path(tiny, 'wnids.txt').read_text().split())
    ds = TinyImageNet(tiny, split='val', view=None)
    assert len(ds) == len(rows) == 8
    for i, (path, _) in enumerate(ds.samples):
        assert ds[i]['data_samples'] == wnids.index(wnid_of[Path(path).name])
    assert len(set(ds.targets[:4])) > 1  # classes interleaved, so order alone cannot give labels
    test = TinyImageNet(str(Path(tiny).parent), split='test', view=None)  # alias, parent root
    assert test.samples == ds.samples


def test_tiny_view_and_registry_build(tiny):
    ds = DATASETS.build(dict(type='TinyImageNet', data_root=tiny, input_size=24, view='mocov2'))
    views = ds[0]['inputs']
    assert len(views) == 2 and all(v.shape == (3, 24, 24) for v in views)


def test_tiny_constructor_checks_each_image_once_then_uses_the_cache(tmp_path, monkeypatch):
    from benchmark import data_scan
    root = make_fake_tiny_imagenet(tmp_path, num_classes=2, train_per_class=1, val_per_class=2,
                                   size=8)
    opened, real_open = [], Image.open
    monkeypatch.setattr(Image, 'open',
                        lambda fp, *a, **k: opened.append(fp) or real_open(fp, *a, **k))
    ds = TinyImageNet(root, split='val')
    assert sorted(opened) == sorted(path for path, _ in ds.samples) and len(ds) == 4
    opened.clear()
    assert len(TinyImageNet(root, split='val')) == 4 and opened == []  # in-process results
    data_scan._MEMO.clear()
    assert len(TinyImageNet(root, split='val')) == 4 and opened == []  # the data root's file
    assert Path(root, '.image_scan.json').is_file()


# ---------------------------------------------------------------- CIFAR

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


# ---------------------------------------------------------------- ImageFolder, Digits

@pytest.mark.parametrize('splits', [('train', 'val'), ()])
def test_image_folder_labels(tmp_path, splits):
    root = make_fake_image_folder(tmp_path, classes=('b_dog', 'a_cat'), splits=splits, per_class=2)
    ds = ImageFolderDataset(root, split='test', view=None)  # 'test' falls back to val/ or flat
    assert ds.classes == ['a_cat', 'b_dog'] and len(ds) == 4
    for i, (path, label) in enumerate(ds.samples):
        assert ds[i]['data_samples'] == label == ds.classes.index(Path(path).parent.name)
        assert (splits == () or Path(path).parts[-3] == 'val')


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


# ---------------------------------------------------------------- views

@pytest.mark.parametrize('name, two_views', [
    ('mocov2', True), ('simclr', True), ('linear_train', False), ('test', False)])
def test_view_shapes(name, two_views):
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 50, 3), np.uint8))
    out = build_view(name, 24)(image)
    views = out if two_views else [out]
    assert isinstance(out, list) == two_views and len(views) == (2 if two_views else 1)
    assert all(v.shape == (3, 24, 24) and v.dtype == torch.float32 for v in views)


def test_test_view_is_deterministic_resize_then_crop():
    view = build_view('test', 224, normalize=None)
    assert view.transforms[0].size == 256  # round(224 / 0.875)
    image = Image.new('RGB', (300, 200), (255, 0, 51))
    out = view(image)
    torch.testing.assert_close(out, view(image))
    torch.testing.assert_close(out[:, 0, 0], torch.tensor([1.0, 0.0, 0.2]))


def test_unknown_view_lists_valid_names():
    with pytest.raises(ValueError) as info:
        build_view('moco', 32)
    assert '\n' not in str(info.value) and 'mocov2' in str(info.value) and 'test' in str(info.value)


# ---------------------------------------------------------------- errors

def _assert_one_line(error: DataRootError, path: str, *words: str) -> None:
    message = str(error)
    assert isinstance(error, FileNotFoundError) and '\n' not in message
    assert path in message and 'tools/prepare_data.py' in message
    assert all(word in message for word in words), message


@pytest.mark.parametrize('cls', [TinyImageNet, CIFAR10, CIFAR100, ImageFolderDataset])
def test_missing_root_raises_one_line_error(tmp_path, cls):
    missing = str(tmp_path / 'nowhere')
    with pytest.raises(DataRootError) as info:
        cls(missing, split='train')
    _assert_one_line(info.value, missing, 'not found')
    with pytest.raises(DataRootError):
        cls.check_root(missing)


def test_malformed_roots_raise_one_line_error(tmp_path):
    tiny = make_fake_tiny_imagenet(tmp_path, num_classes=2, train_per_class=1, val_per_class=1,
                                   size=8)
    Path(tiny, 'wnids.txt').unlink()
    with pytest.raises(DataRootError) as info:
        TinyImageNet.check_root(tiny, 'val')
    _assert_one_line(info.value, tiny, 'wnids.txt', 'prepare_data.py tiny --root')
    cifar = make_fake_cifar(tmp_path / 'c', train_per_class=1, test_per_class=0)
    Path(cifar, 'cifar-10-batches-py', 'data_batch_3').unlink()
    CIFAR10.check_root(cifar, 'test')  # the test split does not need the training batches
    with pytest.raises(DataRootError) as info:
        CIFAR10(cifar, split='train')
    _assert_one_line(info.value, cifar, 'data_batch_3', 'prepare_data.py cifar10')
    Path(cifar, 'cifar-10-batches-py', 'test_batch').write_bytes(b'not a pickle')
    with pytest.raises(DataRootError) as info:
        CIFAR10(cifar, split='test')
    _assert_one_line(info.value, cifar, 'test_batch is not a pickle')


def test_unknown_val_wnid_is_malformed(tmp_path):
    tiny = make_fake_tiny_imagenet(tmp_path, num_classes=2, train_per_class=1, val_per_class=1,
                                   size=8)
    annotations = Path(tiny, 'val', 'val_annotations.txt')
    annotations.write_text(annotations.read_text().replace('n00000001', 'n99999999'))
    TinyImageNet.check_root(tiny, 'train')
    with pytest.raises(DataRootError) as info:
        TinyImageNet(tiny, split='val')
    _assert_one_line(info.value, tiny, 'n99999999')


# ---------------------------------------------------------------- tools/prepare_data.py

def _prepare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / 'tools' / 'prepare_data.py'), *args],
                          capture_output=True, text=True, timeout=120)


def test_prepare_data_check(tiny, tmp_path):
    ok = _prepare('check', 'tiny', '--root', tiny)
    assert ok.returncode == 0, ok.stderr
    assert 'train: 4 classes, 12 images' in ok.stdout and 'val: 4 classes, 8 images' in ok.stdout
    bad = _prepare('tiny', '--root', str(tmp_path / 'empty'), '--no-download')
    assert bad.returncode == 2 and 'Traceback' not in bad.stderr
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: dataset root ')
    assert 'tools/prepare_data.py tiny --root' in lines[0]


def test_view_overrides_reach_the_lightly_transform():
    """dict(name=..., **overrides) changes the transform; the preset name keeps the defaults."""
    image = Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8)).convert('RGB')
    torch.manual_seed(0)
    no_flip = build_view(dict(name='mocov2', hf_prob=0.0, min_scale=1.0, cj_prob=0.0,
                              random_gray_scale=0.0, gaussian_blur=0.0), 8, normalize=None)
    a, b = no_flip(image)
    assert torch.equal(a, b)  # nothing random is left, so both views are the plain image
    with pytest.raises(ValueError, match='takes no overrides'):
        build_view(dict(name='test', hf_prob=0.0), 8)
