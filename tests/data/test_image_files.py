"""Tiny-ImageNet and ImageFolder read from their on-disk layouts; bad roots are one line."""
from pathlib import Path

import pytest
from mmengine.registry import DATASETS
from PIL import Image

from benchmark.data import (
    CIFAR10,
    CIFAR100,
    DataRootError,
    ImageFolderDataset,
    TinyImageNet,
)
from benchmark.data.fakes import (
    make_fake_cifar,
    make_fake_image_folder,
    make_fake_tiny_imagenet,
)
from benchmark.names import DATA_NAMES
from tools import prepare_data


def _assert_one_line(error: DataRootError, path: str, *words: str) -> None:
    message = str(error)
    assert isinstance(error, FileNotFoundError) and '\n' not in message
    assert path in message and 'tools/prepare_data.py' in message
    assert all(word in message for word in words), message


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
    from benchmark.data import scan as data_scan
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


@pytest.mark.parametrize('splits', [('train', 'val'), ()])
def test_image_folder_labels(tmp_path, splits):
    root = make_fake_image_folder(tmp_path, classes=('b_dog', 'a_cat'), splits=splits, per_class=2)
    ds = ImageFolderDataset(root, split='test', view=None)  # 'test' falls back to val/ or flat
    assert ds.classes == ['a_cat', 'b_dog'] and len(ds) == 4
    for i, (path, label) in enumerate(ds.samples):
        assert ds[i]['data_samples'] == label == ds.classes.index(Path(path).parent.name)
        assert (splits == () or Path(path).parts[-3] == 'val')


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


def test_prepare_data_check(tiny, tmp_path, run_main):
    """tools/prepare_data.py's main, in-process (tests/e2e/test_tool_inputs.py runs the tool as
    a process)."""
    for kind in ('tiny', 'tiny-imagenet'):  # the short spelling and the record name
        code, out, err, _ = run_main(prepare_data, 'check', kind, '--root', tiny)
        assert code == 0, err
        assert 'train: 4 classes, 12 images' in out and 'val: 4 classes, 8 images' in out
    # every dataset of benchmark/names.py can be checked, by its record name
    assert set(DATA_NAMES.values()) <= set(prepare_data.DATASETS)
    code, _, err, _ = run_main(prepare_data, 'tiny', '--root', tmp_path / 'empty', '--no-download')
    assert code == 2 and 'Traceback' not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: dataset root ')
    assert 'tools/prepare_data.py tiny --root' in lines[0]
