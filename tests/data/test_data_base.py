"""benchmark.data.base: what every dataset shares (items, seeded keys, errors, policies)."""
import os
import re

import numpy as np
import pytest
import torch
from PIL import Image

from benchmark.data.base import (
    BAD_DATA,
    SKIP_HINT,
    BadImageError,
    DataRootError,
    check_bad_data_policy,
    examples_of,
    identity,
    ImageDataset,
    load_rgb,
    split_name,
)
from benchmark.data.sampler import SampleKey


class _Squares(ImageDataset):
    """Three 8x8 images of constant grey levels 0, 100, 200 and labels 2, 0, 1."""

    def __init__(self, view=None, input_size=8):
        super().__init__(input_size, view)
        self.classes, self.targets = ['a', 'b', 'c'], [2, 0, 1]

    def _load(self, index):
        return Image.fromarray(np.full((8, 8, 3), 100 * index, np.uint8))


def test_item_is_the_view_of_the_image_and_its_int_label():
    data = _Squares()
    assert len(data) == 3 and data.metainfo == {'classes': ['a', 'b', 'c']}
    item = data[1]
    assert set(item) == {'inputs', 'data_samples'}
    assert item['data_samples'] == 0 and type(item['data_samples']) is int
    assert np.asarray(item['inputs']).max() == np.asarray(item['inputs']).min() == 100
    assert data.transform is identity  # view=None: the decoded image, picklable


def test_sample_key_seeds_the_view():
    """A random view drawn for SampleKey(i, seed) is a function of the seed only."""
    data = _Squares(view=dict(name='mocov2', min_scale=0.5), input_size=8)
    torch.manual_seed(0)
    first = data[SampleKey(2, 1234)]['inputs']
    torch.manual_seed(99)  # what the process drew before must not matter
    again = data[SampleKey(2, 1234)]['inputs']
    other = data[SampleKey(2, 4321)]['inputs']
    assert data[SampleKey(2, 1234)]['data_samples'] == 1
    for a, b in zip(first, again):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert any(not torch.equal(a, b) for a, b in zip(first, other))


def test_split_names():
    assert [split_name(s) for s in ('train', 'val', 'test')] == ['train', 'val', 'val']
    with pytest.raises(ValueError,
                       match=r"^unknown split 'valid'; valid splits: 'train', 'val', 'test'$"):
        split_name('valid')


def test_bad_data_policy():
    assert BAD_DATA == ('strict', 'skip')
    for policy in BAD_DATA:
        check_bad_data_policy(policy)
    with pytest.raises(ValueError, match=r"^bad_data='ignore' unknown; valid: strict, skip$"):
        check_bad_data_policy('ignore')
    assert SKIP_HINT == 'set train_dataloader.dataset.bad_data=skip'


def test_examples_are_relative_to_the_root():
    root = os.path.join('data', 'tiny')
    paths = [os.path.join(root, c, f'{i}.jpg') for i, c in enumerate('abc', 1)]
    first, second = os.path.join('a', '1.jpg'), os.path.join('b', '2.jpg')
    assert examples_of(root, paths) == f'{first}, {second}'
    assert examples_of(root, paths, 1) == os.path.join('a', '1.jpg')


def test_load_rgb_converts_grey_and_palette_images(tmp_path):
    grey = tmp_path / 'grey.png'
    Image.fromarray(np.full((4, 4), 77, np.uint8), mode='L').save(grey)
    image = load_rgb(str(grey))
    assert image.mode == 'RGB' and np.asarray(image).tolist() == [[[77] * 3] * 4] * 4


def test_errors_are_file_not_found_errors():
    assert issubclass(DataRootError, FileNotFoundError)
    assert issubclass(BadImageError, DataRootError)


def test_bad_image_error_from_a_loader_worker_is_cut_to_one_line():
    worker = ('Caught BadImageError in DataLoader worker process 1.\n'
              'Original Traceback (most recent call last):\n'
              '  File "x.py", line 3, in f\n'
              '    raise BadImageError(msg)\n'
              'benchmark.data.base.BadImageError: /d/a.jpg: truncated image file (x); fix it')
    assert str(BadImageError(worker)) == \
        '/d/a.jpg: truncated image file (x); fix it (in DataLoader worker process 1)'
    plain = '/d/a.jpg: truncated image file (x)'
    assert str(BadImageError(plain)) == plain
    assert str(BadImageError('Caught BadImageError without a traceback\nsecond')) == \
        'Caught BadImageError without a traceback\nsecond'


def test_check_arguments_refuses_what_the_constructor_would_without_reading_a_file(tmp_path):
    """The config check asks the dataset this, in place of building it."""
    from benchmark.data import Digits, TinyImageNet
    nowhere = str(tmp_path / 'nowhere')  # never looked at
    TinyImageNet.check_arguments(data_root=nowhere, split='val', input_size=64, view='test')
    Digits.check_arguments(view=dict(name='mocov2', min_scale=0.5))
    for kwargs, words in [(dict(split='training'), "unknown split 'training'"),
                          (dict(input_size=4), 'input_size must be an integer >= 8, got 4'),
                          (dict(view='bogus'), "unknown view 'bogus'"),
                          (dict(bad_data='lenient'), "bad_data='lenient' unknown"),
                          (dict(), "missing a required argument: 'data_root'"),
                          (dict(data_root=nowhere, size=8), "unexpected keyword argument 'size'")]:
        with pytest.raises((ValueError, TypeError), match=re.escape(words)):
            TinyImageNet.check_arguments(**{'data_root': nowhere, **kwargs}
                                         if kwargs and 'data_root' not in kwargs else kwargs)
    assert not os.path.exists(nowhere)
    with pytest.raises(ValueError, match='input_size must be an integer >= 8'):
        Digits(input_size=7)
