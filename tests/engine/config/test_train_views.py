"""train_views: the paper's configs draw their views on the GPU when they train on one, with PIL
in the loader workers on a CPU; the record says which."""
import pytest

from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import read_config
from benchmark.engine.launch import pin_batches
from benchmark.engine.train_views import place_views, views_path
from benchmark.reports.records import build_record
from tests.conftest import ROOT


def config(name: str):
    return read_config(str(ROOT / 'configs' / name))


@pytest.mark.parametrize('name, raw', [('mixco_r18_tiny.py', 'raw_uint8'),
                                       ('mocov2_r50_imagenet.py',
                                        dict(name='raw_uint8', raw_size=256))])
def test_auto_draws_the_views_on_a_gpu_and_with_pil_on_a_cpu(name, raw):
    cpu, gpu = config(name), config(name)
    view = cpu.train_dataloader.dataset.view
    assert place_views(cpu, cuda=False) == 'loader'
    assert 'train_views' not in cpu and cpu.train_dataloader.dataset.view == view
    assert place_views(gpu, cuda=True) == 'device'
    assert gpu.train_dataloader.dataset.view == raw
    pre = gpu.model.data_preprocessor
    assert (pre.type, pre.view, pre.input_size, pre.compile, pre.graph, pre.prefetch) == (
        'GPUViewPreprocessor', view, gpu.train_dataloader.dataset.input_size, False, 'auto',
        'auto')  # the CUDA graph and draw-ahead: on by default on CUDA (measured on an H200)


def test_on_loader_and_on_device_hold_anywhere_and_a_named_preprocessor_stays():
    cfg = config('mixco_r18_tiny.py')
    cfg.train_views.on = 'loader'
    assert place_views(cfg, cuda=True) == 'loader'
    cfg = config('mixco_r18_tiny.py')
    cfg.train_views.update(on='device', compile=True, graph=False, prefetch=True)
    assert place_views(cfg, cuda=False) == 'device'
    pre = cfg.model.data_preprocessor
    assert pre.compile is True and pre.graph is False and pre.prefetch is True
    fast = config('mixco_r18_tiny_fast.py')  # its own preprocessor: on='loader' changes nothing
    fast.train_views.on = 'loader'
    assert place_views(fast, cuda=False) == 'device' == views_path(fast)


@pytest.mark.parametrize('cuda, given, pinned', [(True, None, True), (False, None, None),
                                                (True, False, False)])
def test_a_gpu_run_pins_its_batches_unless_the_config_says(cuda, given, pinned):
    cfg = config('mixco_r18_tiny.py')
    if given is not None:
        cfg.train_dataloader.pin_memory = given
    pin_batches(cfg, cuda)
    assert cfg.train_dataloader.get('pin_memory') == pinned


@pytest.mark.parametrize('value, line', [
    ('gpu', "train_views must be a dict like dict(on='auto'), got 'gpu'"),
    (dict(on='gpu'), "train_views.on='gpu': not one of auto, device, loader"),
    (dict(on='auto', raw=64),
     "train_views: unknown key 'raw'; valid: on, raw_size, compile, graph, prefetch"),
    (dict(compile='yes'), "train_views.compile must be True or False, got 'yes'"),
    (dict(graph='on'), "train_views.graph must be 'auto', True or False, got 'on'"),
    (dict(prefetch=1), "train_views.prefetch must be 'auto', True or False, got 1")])
def test_bad_train_views_are_one_line(value, line):
    cfg = config('mixco_r18_tiny.py')
    cfg.train_views = value
    with pytest.raises(ValueError) as err:
        place_views(cfg, cuda=True)
    assert str(err.value) == line


def test_the_check_builds_the_views_a_gpu_run_would_take():
    cfg = config('mixco_r18_tiny.py')
    validate_config(cfg, cuda=True)  # the device views' preprocessor and raw dataset, built
    cfg.train_views.on = 'gpu'
    with pytest.raises(ValueError, match="train_views.on='gpu'"):
        validate_config(cfg, cuda=True)
    assert 'train_views' in cfg  # the check works on a copy


@pytest.mark.parametrize('model, line', [(None, 'model: missing'),
                                         (5, 'model must be a dict, got 5')])
@pytest.mark.parametrize('cuda', [False, True])
def test_a_config_without_a_model_is_the_same_one_line_on_a_gpu(cuda, model, line):
    """train_views moves the views into the model's preprocessor on a GPU; without a model
    (or with one that is no dict) the check still says what is wrong in one line."""
    cfg = config('mixco_r18_tiny.py')
    if model is None:
        cfg.pop('model')
    else:
        cfg.model = model
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, cuda=cuda)
    assert str(err.value) == line


def test_the_record_says_where_the_views_were_drawn():
    run = dict(method='mixco', backbone='resnet18', pretrain_data='digits', pretrain_epochs=1,
               eval_data='digits', seed=0,
               protocols=dict(knn=dict(settings=dict(k=5), metrics=dict(top1=50.0))), world_size=1, total_batch=8)
    assert build_record(**run, views='device')['extra']['views'] == 'device'
    assert 'views' not in build_record(**run)['extra']
    with pytest.raises(ValueError, match="views must be 'device' or 'loader', got 'gpu'"):
        build_record(**run, views='gpu')
