"""benchmark.engine.config.check: every config validates; malformed ones fail with one line naming the
key, before any data is read, through tools/train.py and tools/eval.py as well (their ``main``
in-process, as their command line calls it; tests/e2e/test_tool_inputs.py runs them as processes).

The generated cases are batched: one test walks a table and lists every case that fails."""
import copy
import inspect
import re
import time

import pytest
from mmengine.config import Config
from mmengine.runner import Runner

from benchmark.engine.compat import parse_cfg_option
from benchmark.engine.config.check import ConfigError, merge_options, validate_config
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


def test_every_config_validates():
    failures = []
    for path in CONFIGS:
        name = str(path.relative_to(ROOT / 'configs'))
        try:
            validate_config(load(name))
        except ConfigError as err:
            failures.append(f'{name}: {err}')
    assert not failures, '\n'.join(failures)


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


# (config, --cfg-options, the key path the one-line message must name, other words it must hold)
BAD = [
    ('mixco_r18_tiny.py', 'model.temprature=0.1', 'model.temprature',
     "did you mean 'model.temperature'?"),
    ('mixco_r18_tiny.py', 'randomnes.seed=1', 'randomnes', "did you mean 'randomness'?"),
    ('mixco_r18_tiny.py', 'default_hooks.loger.interval=5', 'default_hooks.loger',
     "did you mean 'default_hooks.logger'?"),
    ('mixco_r18_tiny.py', 'default_hooks.logger.intervall=5', 'default_hooks.logger.intervall',
     'did you mean'),
    ('mocov2_r18_tiny.py', 'optim_wrapper.optimizer.momentun=0.9',
     'optim_wrapper.optimizer.momentun', "'optim_wrapper.optimizer.momentum'"),
    ('mocov2_r18_tiny.py', 'train_dataloader.sampler.shufle=False', 'train_dataloader.sampler',
     'shuffle'),
    ('mocov2_r18_tiny.py', 'train_dataloader.drop_lst=True', 'train_dataloader.drop_lst',
     'drop_last'),
    ('mocov2_r18_tiny.py', 'model.backbone.small_stm=True', 'model.backbone.small_stm',
     'small_stem'),
    ('mocov2_r18_tiny.py', 'env_cfg.mp_cfg.mp_start_methd=fork', 'env_cfg.mp_cfg.mp_start_methd',
     'mp_start_method'),
    ('mixco_r18_digits.py', 'train_dataloader.dataset.view.min_scal=0.1',
     'train_dataloader.dataset.view.min_scal', 'min_scale'),
    ('linear_r18_tiny.py', 'val_cfg.fp61=True', 'val_cfg.fp61', 'fp16'),
    ('mixco_r18_tiny.py', 'model.type=MixCoMoC', 'model.type', "'MixCoMoCo'"),
    ('mixco_r18_tiny.py', 'train_dataloader.dataset.type=TinyImagenet',
     'train_dataloader.dataset.type', "'TinyImageNet'"),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.type=SDG', 'optim_wrapper.optimizer.type',
     "'SGD'"),
    ('mixco_r18_tiny.py', 'param_scheduler.0.type=CosineAnealingLR', 'param_scheduler.0.type',
     "'CosineAnnealingLR'"),
    ('mixco_r18_tiny.py', 'default_hooks.timer.type=IterTimeHook', 'default_hooks.timer.type',
     "'IterTimerHook'"),
    ('mixco_r18_tiny.py', 'custom_hooks.1.type=KNNMonitor', 'custom_hooks.1.type',
     "'KNNMonitorHook'"),
    ('mixco_r18_tiny.py', 'train_dataloader.batch_size=abc', 'train_dataloader.batch_size',
     "must be an integer, got 'abc'"),
    ('mixco_r18_tiny.py', 'train_cfg.max_epochs=1.5', 'train_cfg.max_epochs',
     'must be an integer, got 1.5'),
    ('mixco_r18_tiny.py', 'train_dataloader.drop_last=maybe', 'train_dataloader.drop_last',
     'True or False'),
    ('mixco_r18_tiny.py', 'randomness.seed=abc', 'randomness.seed', 'integer'),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.lr=0', 'optim_wrapper.optimizer.lr', '> 0'),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.lr=-0.1', 'optim_wrapper.optimizer.lr', '> 0'),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.weight_decay=-1e-4',
     'optim_wrapper.optimizer.weight_decay', '>= 0'),
    ('mocov2_r18_tiny.py', 'train_dataloader.batch_size=1', 'train_dataloader.batch_size', '>= 2'),
    ('mixco_r18_tiny.py', 'train_dataloader.batch_size=7', 'train_dataloader.batch_size', 'even'),
    ('mixco_simclr_r18_tiny.py', 'train_dataloader.batch_size=33', 'train_dataloader.batch_size',
     'even'),
    ('mixco_r18_tiny.py', 'model.temperature=-0.1', 'model.temperature', 'must be > 0, got -0.1'),
    ('mixco_r18_tiny.py', 'model.mix_temperature=0', 'model.mix_temperature', '> 0'),
    ('simclr_r18_tiny.py', 'model.temperature=0', 'model.temperature', '> 0'),
    ('mixco_r18_tiny.py', 'custom_hooks.1.temperature=0', 'custom_hooks.1.temperature', '> 0'),
    ('mixco_r18_tiny.py', 'custom_hooks.1.k=0', 'custom_hooks.1.k', '>= 1'),
    ('mixco_r18_tiny.py', 'model.key_momentum=1.0', 'model.key_momentum', '[0, 1)'),
    ('mixco_r18_tiny.py', 'model.key_momentum=-0.5', 'model.key_momentum', '[0, 1)'),
    ('mixco_r18_tiny.py', 'train_cfg.max_epochs=0', 'train_cfg.max_epochs', '>= 1'),
    ('mixco_r18_tiny.py', 'train_dataloader.dataset.input_size=4',
     'train_dataloader.dataset.input_size', '>= 8'),
    ('mixco_r18_tiny.py', 'train_dataloader.dataset.view=bogus', 'train_dataloader.dataset.view',
     'unknown view'),
    ('mixco_r18_tiny.py', 'train_dataloader.dataset.split=training',
     'train_dataloader.dataset.split', 'unknown'),
    ('mixco_r18_tiny.py', 'model.mix_pairing=halfs', 'model.mix_pairing', "'halves'"),
    ('mixco_r18_tiny.py', 'model.backbone.depth=20', 'model.backbone.depth', '18, 34, 50'),
    ('mixco_r18_tiny.py', 'model.queue_size=0', 'model.queue_size', '>= 1'),
    ('mixco_r18_tiny.py', 'auto_scale_lr.base_batch_size=0', 'auto_scale_lr.base_batch_size',
     '>= 1'),
    ('mixco_r18_tiny.py', 'train_dataloader.num_workers=-1', 'train_dataloader.num_workers',
     '>= 0'),
    ('mixco_r18_tiny.py', 'log_processor.window_size=0', 'log_processor.window_size', '>= 1'),
    ('mixco_r18_tiny.py', 'visualizer.vis_backends.1.type=Wandb', 'visualizer.vis_backends.1.type',
     "'WandbVisBackend'"),
    ('linear_r18_tiny.py', 'model.num_classes=1', 'model.num_classes', '>= 2'),
    ('linear_r18_tiny.py', 'val_dataloader.dataset.view=tset', 'val_dataloader.dataset.view',
     "'test'"),
    ('linear_r18_tiny.py', 'val_evaluator.type=LinearAcc', 'val_evaluator.type',
     "'LinearAccuracy'"),
    ('mixco_r18_tiny.py', 'param_scheduler.5.eta_min=0', '--cfg-options', 'Index 5'),
    # values that make a run empty
    ('mixco_r18_tiny.py', 'default_hooks.checkpoint.interval=0', 'default_hooks.checkpoint.interval',
     'or -1 for no periodic checkpoint'),
    ('mixco_r18_tiny.py', 'default_hooks.checkpoint.max_keep_ckpts=0',
     'default_hooks.checkpoint.max_keep_ckpts', '>= 1, or -1'),
    ('mixco_r18_tiny.py', 'default_hooks.logger.interval=0', 'default_hooks.logger.interval', '>= 1'),
    ('mixco_r18_tiny.py', 'custom_hooks.1.interval=0', 'custom_hooks.1.interval', '>= 1'),
    ('mixco_r18_tiny.py', 'train_dataloader.num_batch_per_epoch=0',
     'train_dataloader.num_batch_per_epoch', '>= 1'),
    ('linear_r18_tiny.py', 'train_cfg.val_interval=0', 'train_cfg.val_interval', '>= 1'),
    ('mixco_r18_tiny.py', 'train_cfg.max_epochs=-3', 'train_cfg.max_epochs', '>= 1'),
    ('mixco_r18_tiny.py', 'param_scheduler.0.T_max=0', 'param_scheduler.0.T_max', '>= 1'),
    ('mixco_r18_tiny.py', 'default_hooks.checkpoint.intervall=1',
     'default_hooks.checkpoint.intervall', "did you mean 'default_hooks.checkpoint.interval'"),
    # NaN or infinity anywhere a number is expected
    ('mixco_r18_tiny.py', 'model.temperature=nan', 'model.temperature', 'finite number, got nan'),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.lr=inf', 'optim_wrapper.optimizer.lr',
     'finite number, got inf'),
    ('mixco_r18_tiny.py', 'param_scheduler.0.eta_min=-inf', 'param_scheduler.0.eta_min',
     'finite number, got -inf'),
    ('mixco_r18_tiny.py', 'custom_hooks.1.temperature=nan', 'custom_hooks.1.temperature', 'finite'),
    ('mixco_r18_tiny.py', 'model.mix_weight=1e999', 'model.mix_weight', 'finite number, got inf'),
    ('mixco_r18_digits.py', 'train_dataloader.dataset.view.min_scale=nan',
     'train_dataloader.dataset.view.min_scale', 'finite'),
    ('mixco_r18_tiny.py', 'param_scheduler.0.eta_min=[0,nan]', 'param_scheduler.0.eta_min.1',
     'finite number, got nan'),
    # every field has a range (a few of the table's; test_config_fields has them all)
    ('mixco_r18_tiny.py', 'launcher=pytorh', 'launcher', "did you mean 'pytorch'"),
    ('mixco_r18_tiny.py', 'log_level=INFORMATION', 'log_level', 'unknown log level'),
    ('mixco_r18_tiny.py', 'load_from=/no/such/file.pth', 'load_from', 'not found'),
    ('mixco_r18_tiny.py', 'env_cfg.mp_cfg.mp_start_method=forks', 'env_cfg.mp_cfg.mp_start_method',
     "did you mean 'fork'"),
    ('mixco_r18_tiny.py', 'randomness.seed=-1', 'randomness.seed', '>= 0'),
    ('mixco_r18_tiny.py', 'randomness.seed=4294967296', 'randomness.seed', '< 4294967296'),
    ('mixco_r18_tiny.py', 'train_dataloader.shuffle=True', 'train_dataloader.shuffle',
     'train_dataloader.sampler.shuffle=True instead'),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.momentum=1.0', 'optim_wrapper.optimizer.momentum',
     '[0, 1)'),
    ('mixco_r18_tiny.py', 'optim_wrapper.clip_grad.max_norm=0', 'optim_wrapper.clip_grad.max_norm',
     '> 0'),
    ('mixco_r18_tiny.py', 'custom_hooks.3.signals=[SIGTREM]', 'custom_hooks.3.signals.0',
     "did you mean 'SIGTERM'"),
    ('mixco_r18_tiny.py', 'custom_hooks.0.priority=SOMETIMES', 'custom_hooks.0.priority',
     'unknown priority'),
    ('mixco_r18_tiny.py', 'default_hooks.timer.foo=1', 'default_hooks.timer.foo', 'unknown key'),
]


def test_malformed_config_is_one_line_naming_the_key():
    failures = []
    for config, option, path, words in BAD:
        key, value = option.split('=', 1)
        cfg = load('eval/' + config if config.startswith('linear') else config)
        try:
            merge_options(cfg, {key: parse_cfg_option(value)})  # as --cfg-options
            validate_config(cfg)
        except ConfigError as err:
            message = str(err)
            if '\n' in message or path not in message or words not in message:
                failures.append(f'{config} {option}: {message!r} lacks {path!r} or {words!r}')
        else:
            failures.append(f'{config} {option}: accepted')
    assert not failures, '\n'.join(failures)


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
                          ('mixco_r18_digits.py', {'train_dataloader.dataset.view.min_scale': 0.5,
                                                   'optim_wrapper.optimizer.lr': 1}),
                          ('mocov2_r18_tiny.py', {'train_cfg': dict(_delete_=True, by_epoch=False,
                                                                    max_iters=10)})]:
        cfg = load(name)
        merge_options(cfg, options)
        validate_config(cfg)


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
    assert str(err.value) == ('train_dataloader.persistent_workers=True needs '
                              'train_dataloader.num_workers >= 1 (got 0); set '
                              'persistent_workers=False')
    merge_options(cfg, {'train_dataloader.persistent_workers': False,
                        'train_dataloader.prefetch_factor': 2})
    with pytest.raises(ConfigError, match=r'^train_dataloader.prefetch_factor=2 needs'):
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
    assert time.monotonic() - start < 60  # nothing is built


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
    for option, words in [('train_dataloader.dataset.view=bogus', 'unknown view'),
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
                   words=['configs/mixco_r18_digits.py',
                          'train_dataloader.dataset.input_size must be >= 8'])
