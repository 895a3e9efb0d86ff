"""benchmark.engine.config.check: every config validates (its model, optimizer, schedulers, hooks,
loaders and views built without data, in well under a second), a config is left as it was, and
malformed ones fail with one line naming the key before any data is read, through tools/train.py
and tools/eval.py as well (their ``main`` in-process, as their command line calls it;
tests/e2e/test_tool_inputs.py runs them as processes). The tables of refused configs:
test_config_refused.py."""
import copy
import inspect
import re
import time

import pytest
from mmengine.config import Config
from mmengine.runner import Runner

from benchmark.engine.config.check import BUILT_MODELS, KEPT_MODELS
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import merge_options
from tests.conftest import ROOT
from tools import eval as eval_tool
from tools import train

# Pretraining configs first: the eval configs are validated in the same process after them.
CONFIGS = sorted((ROOT / 'configs').glob('*.py')) + sorted((ROOT / 'configs/eval').glob('*.py'))
_LOADED = {}


def load(name: str) -> Config:
    """A fresh copy of configs/<name> (parsed once per session)."""
    if name not in _LOADED:
        _LOADED[name] = Config.fromfile(str(ROOT / 'configs' / name))
    return copy.deepcopy(_LOADED[name])


def test_config_list_covers_pretraining_and_eval():
    assert len(CONFIGS) >= 23 and any(p.parent.name == 'eval' for p in CONFIGS)


@pytest.mark.slow
def test_every_config_validates_and_is_left_as_it_was():
    failures = []
    for path in CONFIGS:
        name = str(path.relative_to(ROOT / 'configs'))
        cfg = load(name)
        before = cfg.to_dict()
        try:
            validate_config(cfg)
        except ConfigError as err:
            failures.append(f'{name}: {err}')
        if cfg.to_dict() != before:
            failures.append(f'{name}: changed by the check')
    assert not failures, '\n'.join(failures)


def test_the_model_is_built_on_the_meta_device_once_per_config():
    """No storage behind its tensors; a config checked again (a suite's runs, several configs
    in turn) reuses it; only the last few are kept."""
    validate_config(load('mocov2_r18_digits.py'))
    model = next(reversed(BUILT_MODELS.values()))
    assert {p.device.type for p in model.parameters()} == {'meta'}
    validate_config(load('mixco_r18_digits.py'))
    validate_config(load('mocov2_r18_digits.py'))
    assert next(reversed(BUILT_MODELS.values())) is model
    for width in range(1, KEPT_MODELS + 2):
        cfg = load('mocov2_r18_digits.py')
        cfg.model.backbone.width = width / 16 + 0.001  # none is the config's own
        validate_config(cfg)
    assert len(BUILT_MODELS) == KEPT_MODELS and model not in BUILT_MODELS.values()


def test_documented_cfg_options_validate():
    """The --cfg-options keys docs/configuration.md names stay valid (tools/train.py merges
    these)."""
    cfg = load('mixco_r18_tiny.py')
    merge_options(cfg, {'train_dataloader.batch_size': 8, 'train_dataloader.dataset.data_root': '/d',
                        'train_dataloader.dataset.input_size': 32, 'train_cfg.max_epochs': 1,
                        'model.queue_size': 64, 'randomness.seed': 7, 'work_dir': '/w'})
    validate_config(cfg)


def test_top_level_keys_include_what_runner_reads():
    """Every `self.cfg.get('<key>')` of mmengine's Runner is an allowed top-level key."""
    read = set(re.findall(r"self\.cfg\.get\(\s*'(\w+)'", inspect.getsource(Runner)))
    assert read
    for key in read:
        cfg = load('mocov2_r18_digits.py')
        cfg[key] = None
        validate_config(cfg)


def test_valid_variants_pass():
    """The same rules leave legal values alone: an odd batch without MixCo, views, loops."""
    # An odd batch with shuffle_bn='off': in one process the default ('auto') splits the key
    # batch into model.bn_splits BN groups, which an odd batch cannot be.
    for name, options in [('mocov2_r18_tiny.py', {'train_dataloader.batch_size': 7,
                                                  'model.shuffle_bn': 'off'}),
                          ('mixco_r18_tiny.py', {'train_dataloader.dataset.view': 'simclr',
                                                 'model.key_momentum': 0.0,
                                                 'randomness.seed': None,
                                                 'default_hooks.timer': None,
                                                 'custom_hooks.1.priority': 'LOW'}),
                          ('mixco_r18_digits.py', {'model.data_preprocessor.view.min_scale': 0.5,
                                                   'optim_wrapper.optimizer.lr': 1}),
                          ('mocov2_r18_tiny.py', {'train_cfg': dict(_delete_=True, by_epoch=False,
                                                                    max_iters=10)})]:
        cfg = load(name)
        merge_options(cfg, options)
        validate_config(cfg)


def test_a_method_without_its_vocabulary_row_is_refused():
    """A registered method the vocabulary does not name would write records under its class
    name, which no table, baseline or suite knows: refused, saying where the row goes."""
    from mmengine.registry import MODELS

    from methods.simclr import SimCLR

    class UnnamedMethod(SimCLR):
        pass
    MODELS.register_module(module=UnnamedMethod, force=True)
    try:
        cfg = load('simclr_r18_tiny.py')
        cfg.model.type = 'UnnamedMethod'
        with pytest.raises(ConfigError, match=r"^model.type='UnnamedMethod' has no row in METHODS "
                                              r'of benchmark/names.py; add'):
            validate_config(cfg)
    finally:
        MODELS.module_dict.pop('UnnamedMethod')


@pytest.mark.parametrize('world_size, batch, queue, ok', [
    (1, 64, 64, True), (2, 32, 64, True), (2, 32, 63, False), (4, 8, 16, False), (1, 8, 7, False)])
def test_queue_holds_the_total_batch_of_all_processes(world_size, batch, queue, ok):
    """queue_size >= processes x per-process batch, known before training."""
    for name in ('mocov2_r18_tiny.py', 'mixco_r18_tiny.py', 'imix_r18_tiny.py', 'mochi_r18_tiny.py',
                 'unmix_r18_tiny.py'):
        cfg = load(name)
        merge_options(cfg, {'train_dataloader.batch_size': batch, 'model.queue_size': queue})
        if ok:
            validate_config(cfg, world_size=world_size)
            continue
        with pytest.raises(ConfigError) as err:
            validate_config(cfg, world_size=world_size)
        assert str(err.value) == (
            f'model.queue_size ({queue}) must be >= the total batch, {world_size} process(es) x '
            f'train_dataloader.batch_size {batch} = {world_size * batch}; raise model.queue_size '
            'or lower the batch'), name


def test_queue_check_reads_torchrun_world_size_and_uses_the_default_queue(monkeypatch):
    cfg = load('mocov2_r18_tiny.py')
    merge_options(cfg, {'model.queue_size': 100, 'train_dataloader.batch_size': 64})
    validate_config(cfg)  # one process
    monkeypatch.setenv('WORLD_SIZE', '2')
    with pytest.raises(ConfigError, match=r'2 process\(es\) x train_dataloader.batch_size 64 = 128'):
        validate_config(cfg)
    del cfg.model['queue_size']  # MoCo's default K = 65536 holds any batch here
    validate_config(cfg)
    simclr = load('simclr_r18_tiny.py')  # no queue: nothing to check
    validate_config(simclr, world_size=1024)


def test_persistent_workers_and_prefetch_need_workers():
    cfg = load('mocov2_r18_tiny.py')
    merge_options(cfg, {'train_dataloader.num_workers': 0})
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert str(err.value) == ('train_dataloader.persistent_workers=True refused by DataLoader: '
                              'persistent_workers option needs num_workers > 0')
    merge_options(cfg, {'train_dataloader.persistent_workers': False,
                        'train_dataloader.prefetch_factor': 2})
    with pytest.raises(ConfigError, match=r'^train_dataloader.prefetch_factor=2 refused by'):
        validate_config(cfg)
    merge_options(cfg, {'train_dataloader.prefetch_factor': None})
    validate_config(cfg)


@pytest.fixture
def one_error_line(run_main):
    """``one_error_line(tool, *argv, words=...)``: the tool's main, in-process, exits 2 with
    exactly one ``error:`` line on stderr holding every word, no traceback, no usage text."""
    def check(tool, *argv, words=()):
        code, _, err, _ = run_main(tool, *argv)
        assert code == 2, err[-2000:]
        assert 'Traceback' not in err and 'usage:' not in err, err[-2000:]
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith('error:'), err[-2000:]
        assert all(w in lines[0] for w in words), (lines[0], words)
        return lines[0]
    return check


def test_train_reports_bad_key_before_missing_data(tmp_path, one_error_line):
    """A typo'd key and a data root that does not exist: the key is reported, data is not read."""
    start = time.monotonic()
    nowhere = tmp_path / 'nowhere'
    line = one_error_line(train, 'configs/mixco_r18_tiny.py', '--work-dir', tmp_path / 'w',
                          '--cfg-options', f'train_dataloader.dataset.data_root={nowhere}',
                          'model.temprature=0.1',
                          words=['configs/mixco_r18_tiny.py', "'model.temprature'",
                                 "did you mean 'model.temperature'?"])
    assert 'nowhere' not in line and not (tmp_path / 'w').exists()
    assert time.monotonic() - start < 60  # no data is read


def test_train_reports_wrong_type(one_error_line):
    one_error_line(train, 'configs/mixco_r18_digits.py', '--cfg-options',
                   'train_dataloader.batch_size=abc',
                   words=['train_dataloader.batch_size must be an integer'])


def test_train_reports_option_without_equals(one_error_line):
    """argparse stage: no usage text, one line, exit 2."""
    one_error_line(train, 'configs/mixco_r18_digits.py', '--cfg-options', 'train_cfg.max_epochs=1',
                   'model.temprature', words=["'model.temprature'", 'KEY=VALUE'])


def test_train_reports_bad_values_before_training(one_error_line):
    """A bad value fails before training with one line naming it."""
    for option, words in [('model.data_preprocessor.view.name=bogus', 'cannot be drawn on the device'),
                          ('model.temperature=-1', 'temperature must be > 0'),
                          ('model.mix_pairing=random', 'mix_pairing'),
                          ('model.key_momentum=1.5', 'key_momentum')]:
        one_error_line(train, 'configs/mixco_r18_digits.py', '--cfg-options', option,
                       'model.queue_size=64', words=[words])


def test_train_reports_a_missing_data_root(tmp_path, one_error_line):
    """A missing dataset root: one line naming the path and prepare_data.py."""
    missing = tmp_path / 'nowhere'
    one_error_line(train, 'configs/mixco_r18_tiny.py', '--work-dir', tmp_path / 'w',
                   '--cfg-options', f'train_dataloader.dataset.data_root={missing}',
                   words=[str(missing), 'prepare_data.py'])


def test_eval_reports_bad_key(one_error_line):
    one_error_line(eval_tool, 'configs/mixco_r18_digits.py', 'random', '--cfg-options',
                   'train_dataloader.dataset.input_size=4',
                   words=['configs/mixco_r18_digits.py', 'train_dataloader.dataset.input_size=4',
                          '>= 8'])
