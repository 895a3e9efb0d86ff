"""benchmark.data.arrays directly: registry names, check_root errors (one line), pickles."""
import pickle

import pytest
from mmengine.registry import DATASETS

from benchmark.data import arrays
from benchmark.data.arrays import CIFAR10, CIFAR100, Digits, unpickle
from benchmark.data.base import DataRootError
from benchmark.data.fakes import make_fake_cifar

CIFAR10_FILES = ('data_batch_1, data_batch_2, data_batch_3, data_batch_4, data_batch_5, '
                 'test_batch, batches.meta')


def test_registry_names_map_to_this_modules_classes():
    for name in ('CIFAR10', 'CIFAR100', 'Digits'):
        assert DATASETS.get(name) is getattr(arrays, name)
    assert issubclass(CIFAR100, CIFAR10)
    assert (CIFAR100.FOLDER, CIFAR100.LABEL_KEY, CIFAR100.KIND) == (
        'cifar-100-python', 'fine_labels', 'cifar100')


def _one_line(err) -> str:
    text = str(err.value)
    assert '\n' not in text
    return text


def test_missing_root_names_the_layout_and_the_command(tmp_path):
    root = tmp_path / 'nope'
    with pytest.raises(DataRootError) as err:
        CIFAR10.check_root(str(root))
    assert _one_line(err) == (f'dataset root {root} not found (expected cifar-10-batches-py/ with '
                              f'{CIFAR10_FILES}); run: python tools/prepare_data.py cifar10 '
                              f'--root {root}')


def test_empty_root_says_the_folder_is_missing(tmp_path):
    with pytest.raises(DataRootError) as err:
        CIFAR100.check_root(str(tmp_path), 'test')
    assert _one_line(err).startswith(f'dataset root {tmp_path} is malformed: missing '
                                     'cifar-100-python/ (expected cifar-100-python/ with ')
    assert _one_line(err).endswith(f'run: python tools/prepare_data.py cifar100 --root {tmp_path}')


def test_missing_files_are_named_and_the_hint_is_the_parent(tmp_path):
    make_fake_cifar(tmp_path, 'cifar10', train_per_class=1, test_per_class=1)
    folder = tmp_path / 'cifar-10-batches-py'
    CIFAR10.check_root(str(folder), 'train')  # complete: no error
    (folder / 'data_batch_3').unlink()
    CIFAR10.check_root(str(folder), 'val')  # the val split does not need it
    with pytest.raises(DataRootError) as err:
        CIFAR10.check_root(str(folder), 'train')
    text = _one_line(err)
    assert text.startswith(f'dataset root {folder} is malformed: missing data_batch_3 (')
    assert text.endswith(f'--root {tmp_path}')  # the command takes the parent folder


def test_garbage_batch_is_one_line(tmp_path):
    make_fake_cifar(tmp_path, 'cifar10', train_per_class=1, test_per_class=1)
    (tmp_path / 'cifar-10-batches-py' / 'test_batch').write_bytes(b'not a pickle')
    with pytest.raises(DataRootError) as err:
        CIFAR10(str(tmp_path), 'test', view=None)
    assert 'is malformed: test_batch is not a pickle batch (UnpicklingError)' in _one_line(err)


def test_unpickle_decodes_bytes_keys(tmp_path):
    path = tmp_path / 'batch'
    path.write_bytes(pickle.dumps({b'labels': [1, 2], 'data': b'x'}))
    assert unpickle(path) == {'labels': [1, 2], 'data': b'x'}


def test_digits_needs_no_root_but_checks_the_split():
    Digits.check_root('/does/not/matter', 'val')
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        Digits.check_root('', 'dev')
