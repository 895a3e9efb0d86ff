"""The raw_uint8 dataset mode and the config rules that pair it with GPUViewPreprocessor."""

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import default_collate
from PIL import Image

from benchmark.data import Digits, ImageFolderDataset
from benchmark.engine.train_views import fill_view_size
from benchmark.data.raw_view import RawImage
from benchmark.data.sampler import SampleKey
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import merge_options
from tests.conftest import ROOT

CONFIGS = ROOT / 'configs'
DEVICE_VIEWS = {'train_dataloader.dataset.view': 'raw_uint8',
                'model.data_preprocessor.type': 'GPUViewPreprocessor',
                'model.data_preprocessor.view.name': 'mocov2',
                'model.data_preprocessor.view.min_scale': 0.6}


def config(name: str, options: dict) -> Config:
    cfg = Config.fromfile(str(CONFIGS / name))
    merge_options(cfg, options)
    return cfg


def test_raw_mode_returns_the_native_uint8_image_and_the_sample_seed():
    raw, pil = Digits(split='val', view='raw_uint8'), Digits(split='val', view=None)
    item = raw[SampleKey(index=5, seed=123)]
    expected = np.asarray(pil[5]['inputs']).transpose(2, 0, 1)  # (3, 8, 8)
    assert item['inputs'].dtype == torch.uint8 and tuple(item['inputs'].shape) == (3, 8, 8)
    assert np.array_equal(item['inputs'].numpy(), expected) and item['seed'] == 123
    assert item['data_samples'] == pil[5]['data_samples']
    assert 'seed' not in raw[5]  # a plain index has no seed to carry
    batch = default_collate([raw[SampleKey(i, 10 + i)] for i in range(4)])
    assert batch['inputs'].shape == (4, 3, 8, 8) and batch['seed'].tolist() == [10, 11, 12, 13]


def test_raw_size_resizes_the_shorter_side_and_centre_crops(tmp_path):
    image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (30, 50, 3), np.uint8))
    out = RawImage(raw_size=12)(image)
    expected = np.asarray(image.resize((20, 12), Image.BILINEAR))[:, 4:16].transpose(2, 0, 1)
    assert out.dtype == torch.uint8 and np.array_equal(out.numpy(), expected)
    for size, name in ((24, 'a.png'), (40, 'b.png')):  # an ImageFolder of mixed sizes
        folder = tmp_path / 'train' / name[0]
        folder.mkdir(parents=True)
        Image.new('RGB', (size, size + 8), (size, 0, 0)).save(folder / name)
    ds = ImageFolderDataset(str(tmp_path), view=dict(name='raw_uint8', raw_size=16))
    assert default_collate([ds[0], ds[1]])['inputs'].shape == (2, 3, 16, 16)
    with pytest.raises(ValueError, match='raw_size must be a positive integer'):
        RawImage(raw_size=0)


def test_device_views_with_a_raw_dataset_pass_and_take_the_dataset_size():
    cfg = config('mocov2_r18_digits.py', DEVICE_VIEWS)
    validate_config(cfg)
    fill_view_size(cfg)
    assert cfg.model.data_preprocessor.input_size == 16  # the digits config's input_size
    cfg = config('mixco_r18_tiny.py', {**DEVICE_VIEWS, 'train_dataloader.dataset.input_size': 32})
    cfg.train_dataloader.dataset.view = dict(name='raw_uint8', raw_size=64)
    validate_config(cfg)
    fill_view_size(cfg)
    assert cfg.model.data_preprocessor.input_size == 32


def test_tiny_imagenet_fragment_switches_device_views_on(tmp_path):
    path = tmp_path / 'simclr_gpu_views.py'
    path.write_text(f"_base_ = [{str(CONFIGS / '_base_/datasets/tiny_imagenet_gpu_views.py')!r}, "
                    f"{str(CONFIGS / '_base_/schedules/sgd_cosine_100e.py')!r}, "
                    f"{str(CONFIGS / '_base_/runtime/default.py')!r}]\n"
                    "model = dict(type='SimCLR', data_preprocessor=dict(view='simclr'))\n")
    cfg = Config.fromfile(str(path))
    validate_config(cfg)
    fill_view_size(cfg)
    assert cfg.train_dataloader.dataset.view == 'raw_uint8'
    assert cfg.model.data_preprocessor == dict(type='GPUViewPreprocessor', view='simclr',
                                               input_size=224)


@pytest.mark.parametrize('options,words', [
    ({'train_dataloader.dataset.view': 'raw_uint8', 'pil': True},
     'train_dataloader.dataset.view=raw_uint8 hands undecoded uint8 images'),
    ({'model.data_preprocessor.type': 'GPUViewPreprocessor', 'pil': True},
     'draws the views on the device, but train_dataloader.dataset.view is'),
    ({**DEVICE_VIEWS, 'model.data_preprocessor.input_size': 32},
     'model.data_preprocessor.input_size=32 differs from train_dataloader.dataset.input_size=16'),
    ({**DEVICE_VIEWS, 'model.data_preprocessor.view.min_scal': 0.3},
     "model.data_preprocessor.view.min_scal=0.3 refused by MoCo: view 'mocov2': unknown override "
     "'min_scal'"),
    ({**DEVICE_VIEWS, 'model.data_preprocessor.view': 'linear_train'},
     "model.data_preprocessor.view='linear_train' refused by MoCo: view 'linear_train' cannot be "
     "drawn on the device"),
    ({**DEVICE_VIEWS, 'model.data_preprocessor.inputsize': 16},
     "unknown key 'model.data_preprocessor.inputsize' (did you mean"),
    ({**DEVICE_VIEWS, 'view': dict(name='raw_uint8', size=8)},
     "unknown key 'train_dataloader.dataset.view.size'"),
])
def test_unpaired_or_bad_device_views_are_one_line_errors(options, words):
    options = dict(options)
    view = options.pop('view', None)  # a dict cannot replace a str view through a merge
    # 'pil': a config whose views are PIL's (the tiny one); else digits (its views on the device)
    cfg = config('mocov2_r18_tiny.py' if options.pop('pil', False) else 'mocov2_r18_digits.py',
                 options)
    if view is not None:
        cfg.train_dataloader.dataset.view = view
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert words in str(err.value) and '\n' not in str(err.value)
