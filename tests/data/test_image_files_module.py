"""benchmark.data.image_files directly: registry names, check_root errors (one line), order."""
from pathlib import Path

import pytest
from mmengine.registry import DATASETS

from benchmark.data import image_files
from benchmark.data.base import DataRootError
from benchmark.data.fakes import make_fake_tiny_imagenet
from benchmark.data.image_files import ImageFolderDataset, TinyImageNet, class_images

TINY_EXPECTED = 'expected wnids.txt, train/<wnid>/images/, val/images/, val/val_annotations.txt'


def test_registry_names_map_to_this_modules_classes():
    for name in ('TinyImageNet', 'ImageFolderDataset'):
        assert DATASETS.get(name) is getattr(image_files, name)


def _one_line(err) -> str:
    text = str(err.value)
    assert '\n' not in text
    return text


def test_tiny_missing_root(tmp_path):
    root = tmp_path / 'tiny-imagenet-200'
    with pytest.raises(DataRootError) as err:
        TinyImageNet.check_root(str(root))
    assert _one_line(err) == (f'dataset root {root} not found ({TINY_EXPECTED}); '
                              f'run: python tools/prepare_data.py tiny --root {tmp_path}')


def test_tiny_missing_parts_are_named_per_split(tmp_path):
    root = Path(make_fake_tiny_imagenet(tmp_path, num_classes=2, train_per_class=1,
                                        val_per_class=1, size=8))
    assert root.name == 'tiny-imagenet-200'
    TinyImageNet.check_root(str(root), 'train')
    TinyImageNet.check_root(str(tmp_path), 'val')  # the folder that contains it works too
    (root / 'val' / 'val_annotations.txt').unlink()
    TinyImageNet.check_root(str(root), 'train')  # train does not read val/
    with pytest.raises(DataRootError) as err:
        TinyImageNet.check_root(str(root), 'test')
    assert _one_line(err).startswith(f'dataset root {root} is malformed: missing '
                                     'val/val_annotations.txt (')


def test_image_folder_errors(tmp_path):
    with pytest.raises(DataRootError) as err:
        ImageFolderDataset.check_root(str(tmp_path / 'x'))
    assert _one_line(err) == (
        f'dataset root {tmp_path / "x"} not found (expected <split>/<class>/<image> or '
        f'<class>/<image>); check with: python tools/prepare_data.py check folder '
        f'--root {tmp_path / "x"}')
    (tmp_path / 'train' / 'cat').mkdir(parents=True)
    with pytest.raises(DataRootError) as err:
        ImageFolderDataset.check_root(str(tmp_path), 'val')
    assert 'is malformed: missing val/' in _one_line(err)
    with pytest.raises(DataRootError) as err:
        ImageFolderDataset.check_root(str(tmp_path), 'train')
    assert 'is malformed: no class folder with images in' in _one_line(err)


def test_class_images_in_torchvision_order_without_hidden_files(tmp_path):
    for rel in ('b.png', 'a.JPG', '.hidden.png', 'notes.txt', 'sub/c.jpeg', '.ipynb/d.png'):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b'')
    assert class_images(str(tmp_path)) == [str(tmp_path / 'a.JPG'), str(tmp_path / 'b.png'),
                                            str(tmp_path / 'sub' / 'c.jpeg')]
