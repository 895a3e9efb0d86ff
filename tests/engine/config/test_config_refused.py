"""Every malformed config the pre-flight check refuses, walked as tables: one line naming the key
path, before anything is built from data. `BAD`: picked cases (as --cfg-options) and words the
line holds. `CASES`: an out-of-range value of each key whose value a component (or a rule) refuses,
for the components the configs name and their common swaps. Each test walks its whole table and
lists every case that fails."""
import copy

import pytest
from mmengine.config import Config

import benchmark.harness.faults.hooks  # noqa: F401  the fault campaign's configs name these
from benchmark.engine.compat import parse_cfg_option
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import merge_options
from tests.conftest import ROOT

nan, inf = float('nan'), float('inf')
_LOADED = {}


def load(name: str) -> dict:
    """A fresh copy of configs/<name> (parsed once per session)."""
    if name not in _LOADED:
        _LOADED[name] = Config.fromfile(str(ROOT / 'configs' / name)).to_dict()
    return copy.deepcopy(_LOADED[name])


def refusal(cfg, where: str, words: str = ''):
    """None if validate_config refuses `cfg` in one line holding `where` and `words`; else what
    happened instead."""
    try:
        validate_config(Config(cfg), world_size=1)
    except ConfigError as err:
        message = str(err)
        ok = '\n' not in message and where in message and words in message
        return None if ok else f'message {message!r}'
    return 'accepted'


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
    ('mixco_r18_tiny.py', 'train_dataloader.dataset.view.min_scal=0.1',
     'train_dataloader.dataset.view.min_scal', "did you mean 'min_scale'"),
    ('mixco_r18_digits.py', 'model.data_preprocessor.view.min_scal=0.1',
     'model.data_preprocessor.view', "unknown override 'min_scal'"),
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
     "must be an integer or None, got 'abc'"),
    ('mixco_r18_tiny.py', 'train_cfg.max_epochs=1.5', 'train_cfg.max_epochs',
     'must be an integer, got 1.5'),
    ('mixco_r18_tiny.py', 'train_dataloader.drop_last=maybe', 'train_dataloader.drop_last',
     'True or False'),
    ('mixco_r18_tiny.py', 'randomness.seed=abc', 'randomness.seed', 'integer'),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.lr=0', 'optim_wrapper.optimizer.lr', '> 0'),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.lr=-0.1', 'optim_wrapper.optimizer.lr', '> 0'),
    ('mixco_r18_tiny.py', 'optim_wrapper.optimizer.weight_decay=-1e-4',
     'optim_wrapper.optimizer.weight_decay', 'Invalid weight_decay value'),
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
     'train_dataloader.dataset.split', 'unknown split'),
    ('mixco_r18_tiny.py', 'model.mix_pairing=halfs', 'model.mix_pairing', "'halves'"),
    ('mixco_r18_tiny.py', 'model.backbone.depth=20', 'model.backbone.depth', '18, 34, 50'),
    ('mixco_r18_tiny.py', 'model.queue_size=0', 'model.queue_size', '>= 1'),
    ('mixco_r18_tiny.py', 'auto_scale_lr.base_batch_size=0', 'auto_scale_lr.base_batch_size',
     '>= 1'),
    ('mixco_r18_tiny.py', 'train_dataloader.num_workers=-1', 'train_dataloader.num_workers',
     'non-negative'),
    ('mixco_r18_tiny.py', 'log_processor.window_size=0', 'log_processor.window_size', '>= 1'),
    ('mixco_r18_tiny.py', 'visualizer.vis_backends.1.type=Wandb', 'visualizer.vis_backends.1.type',
     "'WandbVisBackend'"),
    ('linear_r18_tiny.py', 'model.num_classes=1', 'model.num_classes', '>= 2'),
    ('linear_r18_tiny.py', 'val_dataloader.dataset.view=tset', 'val_dataloader.dataset.view',
     "did you mean 'test'"),
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
    ('mixco_r18_tiny.py', 'train_dataloader.dataset.view.min_scale=nan',
     'train_dataloader.dataset.view.min_scale', 'finite'),
    ('mixco_r18_digits.py', 'model.data_preprocessor.view.min_scale=nan',
     'model.data_preprocessor.view', 'min_scale'),
    ('mixco_r18_tiny.py', 'param_scheduler.0.eta_min=[0,nan]', 'param_scheduler.0.eta_min.1',
     'finite number, got nan'),
    # values only mmengine's Runner reads, or that mmengine and torch take unchecked
    ('mixco_r18_tiny.py', 'launcher=pytorh', 'launcher', "did you mean 'pytorch'"),
    ('mixco_r18_tiny.py', 'log_level=INFORMATION', 'log_level', "unknown value 'INFORMATION'"),
    ('mixco_r18_tiny.py', 'load_from=/no/such/file.pth', 'load_from', 'not found'),
    ('mixco_r18_tiny.py', 'env_cfg.mp_cfg.mp_start_method=forks', 'env_cfg.mp_cfg.mp_start_method',
     "did you mean 'fork'"),
    ('mixco_r18_tiny.py', 'randomness.seed=-1', 'randomness.seed', 'in [0, 4294967296)'),
    ('mixco_r18_tiny.py', 'randomness.seed=4294967296', 'randomness.seed', '4294967296)'),
    ('mixco_r18_tiny.py', 'train_dataloader.shuffle=True', 'train_dataloader.shuffle',
     'mutually exclusive with shuffle'),
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


@pytest.mark.slow
def test_malformed_config_is_one_line_naming_the_key():
    failures = []
    for config, option, path, words in BAD:
        key, value = option.split('=', 1)
        cfg = Config(load('eval/' + config if config.startswith('linear') else config))
        try:
            merge_options(cfg, {key: parse_cfg_option(value)})  # as --cfg-options
        except ConfigError as err:
            why = None if path in str(err) and words in str(err) else f'message {str(err)!r}'
        else:
            why = refusal(cfg.to_dict(), path, words)
        if why:
            failures.append(f'{config} {option}: {why} (wanted {path!r} and {words!r})')
    assert not failures, '\n'.join(failures)




# Where a component no config names sits while its keys are tried: (path, the section put there).
PLACES = {
    'ImageFolderDataset':
        ('train_dataloader.dataset', {'type': 'ImageFolderDataset', 'data_root': 'd',
                                      'input_size': 32, 'view': {'name': 'mocov2'}}),
    'ChannelsLastDistributedDataParallel':
        ('model_wrapper_cfg', {'type': 'ChannelsLastDistributedDataParallel'}),
    'CompileHook': ('custom_hooks.0', {'type': 'CompileHook'}),
    'KillHook': ('custom_hooks.0', {'type': 'KillHook'}),
    'PoisonHook': ('custom_hooks.0', {'type': 'PoisonHook', 'at_iter': 3}),
    'pseudo_collate': ('train_dataloader.collate_fn', {'type': 'pseudo_collate'}),
    'CheckpointHook': ('default_hooks.checkpoint', {'type': 'CheckpointHook', 'interval': 1}),
    'BaseDataPreprocessor': ('model.data_preprocessor', {'type': 'BaseDataPreprocessor'}),
    'MMDistributedDataParallel': ('model_wrapper_cfg', {'type': 'MMDistributedDataParallel'}),
    'ConstantLR': ('param_scheduler.0', {'type': 'ConstantLR'}),
    'LinearLR': ('param_scheduler.0', {'type': 'LinearLR'}),
    'StepLR': ('param_scheduler.0', {'type': 'StepLR', 'step_size': 10}),
    'IterBasedTrainLoop': ('train_cfg', {'type': 'IterBasedTrainLoop', 'max_iters': 10}),
    'TestLoop': ('test_cfg', {'type': 'TestLoop'}),
    'WandbVisBackend': ('visualizer.vis_backends.1', {'type': 'WandbVisBackend'}),
    'compile': ('compile', {}),
    'Adam': ('optim_wrapper.optimizer', {'type': 'Adam', 'lr': 0.001}),
    'AdamW': ('optim_wrapper.optimizer', {'type': 'AdamW', 'lr': 0.001}),
}
# (config, place or None, section path, {key: a value the check refuses}): each key alone (a
# hook's priority, read alike for every hook, in a few). Not here: mmengine's own CheckpointHook
# and DefaultSampler (configs name SafeCheckpointHook and ResumableSampler, which refuse these
# values) and AmpOptimWrapper, built only with an accelerator (CPUCapableAmpOptimWrapper's are).
CASES = [
    ('mocov2_r18_tiny.py', None, 'auto_scale_lr', {'enable': 'maybe', 'base_batch_size': 0}),
    ('eval/linear_r18_cifar10.py', None, 'train_dataloader.dataset',
     {'input_size': 7, 'view': 'bogus', 'split': 'no-such-choice'}),
    ('eval/linear_r18_cifar100.py', None, 'train_dataloader.dataset',
     {'input_size': -1, 'view': {'name': 'bogus'}}),
    ('imix_r18_digits.py', None, 'train_dataloader.dataset',
     {'input_size': 1.5, 'view': {'name': 'mocov2', 'min_scale': 0}}),
    ('mixco_r18_tiny_fast.py', None, 'model.data_preprocessor',
     {'non_blocking': 'maybe', 'view': 'bogus', 'input_size': 7, 'num_views': 0, 'chunk_size': 0}),
    ('mocov2_r18_tiny.py', 'ImageFolderDataset', 'train_dataloader.dataset',
     {'input_size': None, 'bad_data': 'no-such-choice'}),
    ('imix_r18_digits.py', None, 'train_dataloader.sampler',
     {'dataset': 'x', 'shuffle': 'maybe', 'seed': -1, 'round_up': 'maybe'}),
    ('mocov2_r18_tiny.py', 'ChannelsLastDistributedDataParallel', 'model_wrapper_cfg',
     {'module': 'x', 'detect_anomalous_params': 'maybe'}),
    ('imix_r18_digits.py', None, 'default_hooks.checkpoint',
     {'priority': 'SOMETIMES', 'interval': 0, 'by_epoch': 'maybe', 'save_optimizer': 'maybe',
     'save_param_scheduler': 'maybe', 'max_keep_ckpts': 0, 'save_last': 'maybe', 'rule':
     'no-such-choice', 'filename_tmpl': 'epoch.pth', 'save_begin': -1, 'iter_interval': -1}),
    ('mixco_r18_tiny_fast.py', None, 'optim_wrapper',
     {'accumulative_counts': 0, 'clip_grad': 'x', 'paramwise_cfg': 'x', 'loss_scale': 0.0, 'dtype':
     'no-such-choice', 'use_fsdp': 'maybe'}),
    ('mocov2_r18_tiny.py', 'CompileHook', 'custom_hooks.0',
     {'priority': 'SOMETIMES', 'fullgraph': 'maybe', 'dynamic': 'maybe', 'mode':
     'no-such-choice'}),
    ('imix_r18_digits.py', None, 'default_hooks.runtime_info',
     {'priority': 'SOMETIMES', 'interval': 0}),
    ('imix_r18_digits.py', None, 'custom_hooks.3', {'priority': 'SOMETIMES', 'interval': 0}),
    ('imix_r18_digits.py', None, 'custom_hooks.4', {'priority': 101, 'signals': ['SIGNOPE']}),
    ('imix_r18_digits.py', None, 'visualizer.vis_backends.1',
     {'commit': 'maybe', 'log_code': 'maybe'}),
    ('imix_r18_digits.py', None, 'custom_hooks.1',
     {'priority': 'SOMETIMES', 'interval': 0, 'num_train': 0, 'num_test': 0, 'k': 0, 'temperature':
     0, 'seed': -1, 'batch_size': 0, 'num_workers': -1}),
    ('eval/linear_r18_cifar10.py', None, 'val_evaluator',
     {'collect_device': 'no-such-choice', 'prefix': 3, 'topk': 'x'}),
    ('eval/linear_r18_cifar10.py', None, 'model', {'num_classes': 1, 'checkpoint': 3}),
    ('imix_r18_digits.py', None, 'custom_hooks.2',
     {'priority': 'SOMETIMES', 'lr': 0, 'momentum': 1, 'weight_decay': -1, 'interval': 0,
     'num_test': 0, 'seed': -1, 'batch_size': 0, 'num_workers': -1}),
    ('mocov2_r18_tiny.py', 'KillHook', 'custom_hooks.0',
     {'priority': -1, 'at_iter': 0, 'during_save': 0, 'delay_s': -1, 'during_eval': 'maybe',
     'rank': -1, 'signal_at_iter': 0, 'sig': 'SIGNOPE'}),
    ('mocov2_r18_tiny.py', 'PoisonHook', 'custom_hooks.0', {'at_iter': -1, 'rank': 1.5}),
    ('mocov2_r18_tiny.py', None, '',
     {'sync_bn': 'no-such-choice', 'find_unused_parameters': 'maybe', 'load_from': 3, 'resume':
     'maybe', 'launcher': 'no-such-choice', 'log_level': 'no-such-choice', 'cfg': 'x'}),
    ('mocov2_r18_tiny.py', None, '',  # sections of the wrong shape
     {'model': 'x', 'train_dataloader': 3, 'custom_imports': 3, 'custom_hooks': {},
      'default_hooks': [1], 'optim_wrapper': 'x', 'env_cfg.type': 3, 'randomness.type': 'x'}),
    ('mocov2_r18_tiny.py', None, 'env_cfg',
     {'cudnn_benchmark': 'maybe', 'dist_cfg': 'x', 'resource_limit': 0}),
    ('mocov2_r18_tiny.py', None, 'train_dataloader.dataset.view',
     {'input_size': 'x', 'normalize': 'x', 'cj_prob': -0.1, 'cj_strength': -1, 'cj_bright': -1,
     'cj_contrast': -1, 'cj_sat': -1, 'cj_hue': -1, 'min_scale': 0, 'random_gray_scale': -0.1,
     'gaussian_blur': -0.1, 'sigmas': 'x', 'vf_prob': -0.1, 'hf_prob': -0.1, 'rr_prob': -0.1}),
    ('simclr_r18_tiny.py', None, 'train_dataloader.dataset.view',
     {'cj_prob': 1.5, 'cj_strength': -1e-09, 'cj_bright': -1e-09, 'cj_contrast': -1e-09, 'cj_sat':
     -1e-09, 'cj_hue': 1.5, 'min_scale': -1, 'random_gray_scale': 1.5, 'gaussian_blur': 1.5,
     'sigmas': [], 'vf_prob': 1.5, 'hf_prob': 1.5, 'rr_prob': 1.5}),
    ('mocov2_r18_tiny.py', None, 'model.backbone',
     {'depth': 'no-such-choice', 'small_stem': 'maybe'}),
    ('imix_r18_digits.py', None, 'model',
     {'feature_dim': 0, 'queue_size': 0, 'key_momentum': 1, 'temperature': 0, 'head_batch_norm':
     'maybe', 'shuffle_bn': 'no-such-choice', 'bn_splits': 0, 'mix_alpha': 0, 'mix_lambda_scope':
     'no-such-choice', 'mix_lambda_fold': 'maybe'}),
    ('mixco_r18_digits.py', None, 'model',
     {'feature_dim': -1, 'queue_size': -1, 'key_momentum': 1.5, 'temperature': -1,
     'head_batch_norm': 2, 'bn_splits': -1, 'mix_temperature': 0, 'mix_weight': -1, 'mix_lambda':
     'no-such-choice', 'mix_alpha': -1, 'mix_pairing': 'no-such-choice', 'mix_joint_forward':
     'maybe', 'mix_in_batch_negatives': 'maybe', 'mix_target': 'no-such-choice'}),
    ('mixco_simclr_r18_tiny.py', None, 'model',
     {'feature_dim': 1.5, 'temperature': nan, 'joint_forward': 'maybe', 'gather_negatives':
     'maybe', 'sync_bn': 'maybe', 'mix_temperature': -1, 'mix_weight': -1e-09, 'mix_alpha': nan,
     'mix_joint_forward': 2, 'mix_in_batch_negatives': 2}),
    ('mochi_r18_digits.py', None, 'model',
     {'feature_dim': None, 'queue_size': 1.5, 'key_momentum': -0.5, 'temperature': inf,
     'bn_splits': 1.5, 'mix_hardest': 0, 'mix_synthetic': -1, 'mix_query_synthetic': -1,
     'mix_warmup_epochs': -1}),
    ('mocov2_r18_digits.py', None, 'model',
     {'queue_size': None, 'key_momentum': nan, 'temperature': '1', 'bn_splits': None}),
    ('simclr_r18_tiny.py', None, 'model',
     {'joint_forward': 2, 'gather_negatives': 2, 'sync_bn': 2}),
    ('supervised_r18_tiny.py', None, 'model', {'num_classes': -1}),
    ('unmix_r18_digits.py', None, 'model',
     {'mix_alpha': inf, 'mix_schedule': 'no-such-choice', 'mix_global_prob': -0.1}),
    ('eval/linear_r18_cifar10.py', None, 'train_dataloader.sampler',
     {'shuffle': 2, 'seed': 1.5, 'round_up': 2}),
    ('imix_r18_digits.py', None, 'train_dataloader.collate_fn', {'data_batch': 'x'}),
    ('mocov2_r18_tiny.py', 'CheckpointHook', 'default_hooks.checkpoint',
     {'priority': 101, 'by_epoch': 2, 'save_optimizer': 2, 'save_param_scheduler': 2,
      'save_last': 2, 'save_begin': 1.5}),
    ('imix_r18_digits.py', None, 'default_hooks.logger',
     {'priority': 'SOMETIMES', 'interval': 0, 'ignore_last': 'maybe', 'interval_exp_name': 0,
     'keep_local': 'maybe', 'log_metric_by_epoch': 'maybe'}),
    ('mocov2_r18_tiny.py', 'BaseDataPreprocessor', 'model.data_preprocessor', {'non_blocking': 2}),
    ('mocov2_r18_tiny.py', 'MMDistributedDataParallel', 'model_wrapper_cfg',
     {'detect_anomalous_params': 2}),
    ('imix_r18_digits.py', None, 'optim_wrapper',
     {'accumulative_counts': 1.5, 'clip_grad': {'max_norm': 0}, 'paramwise_cfg': {'custom_keys':
     {'head': {'lr_mult': -1}}}}),
    ('mocov2_r18_tiny.py', 'ConstantLR', 'param_scheduler.0',
     {'optimizer': 'x', 'param_name': 'x', 'begin': -1, 'end': 0, 'last_step': -2, 'by_epoch':
     'maybe', 'verbose': 'maybe', 'convert_to_iter_based': 'maybe', 'factor': 0}),
    ('imix_r18_digits.py', None, 'param_scheduler.0',
     {'begin': 1.5, 'end': -1, 'last_step': 1.5, 'by_epoch': 2, 'verbose': 2,
     'convert_to_iter_based': 2, 'T_max': 0, 'eta_min': -1, 'eta_min_ratio': -1}),
    ('mocov2_r18_tiny.py', 'LinearLR', 'param_scheduler.0',
     {'begin': None, 'end': 1.5, 'last_step': None, 'start_factor': 0, 'end_factor': -1}),
    ('eval/linear_r18_cifar10.py', None, 'param_scheduler.0',
     {'end': None, 'milestones': 'x', 'gamma': 0}),
    ('mocov2_r18_tiny.py', 'StepLR', 'param_scheduler.0', {'step_size': 0, 'gamma': -1}),
    ('mocov2_r18_tiny.py', None, 'log_processor',
     {'window_size': 0, 'by_epoch': 'maybe', 'custom_cfg': 'x', 'num_digits': -1,
     'log_with_hierarchy': 'maybe', 'mean_pattern': '('}),
    ('imix_r18_digits.py', None, 'train_cfg',
     {'runner': 'x', 'dataloader': 'x', 'max_epochs': 0, 'val_begin': 0, 'val_interval': 0,
     'dynamic_intervals': 'x', 'by_epoch': 'maybe'}),
    ('mocov2_r18_tiny.py', 'IterBasedTrainLoop', 'train_cfg',
     {'max_iters': 0, 'val_begin': -1, 'val_interval': -1, 'dynamic_intervals': ['x'], 'by_epoch':
     2}),
    ('mocov2_r18_tiny.py', 'TestLoop', 'test_cfg',
     {'runner': 'x', 'dataloader': 'x', 'evaluator': 'x', 'fp16': 'maybe'}),
    ('eval/linear_r18_cifar10.py', None, 'val_cfg',
     {'runner': 'x', 'dataloader': 'x', 'evaluator': 'x', 'fp16': 'maybe'}),
    ('mocov2_r18_tiny.py', None, 'randomness',
     {'seed': -1, 'diff_rank_seed': 'maybe', 'deterministic': 'maybe'}),
    ('mocov2_r18_tiny.py', None, 'env_cfg.mp_cfg',
     {'mp_start_method': 'no-such-choice', 'opencv_num_threads': -1, 'distributed': 'x'}),
    ('mocov2_r18_tiny.py', 'WandbVisBackend', 'visualizer.vis_backends.1', {'commit': 2}),
    ('mocov2_r18_tiny.py', 'compile', 'compile',
     {'model': 'x', 'fullgraph': 'maybe', 'dynamic': 'maybe', 'mode': 'no-such-choice', 'disable':
     'maybe'}),
    ('mocov2_r18_tiny.py', 'Adam', 'optim_wrapper.optimizer',
     {'params': 'x', 'lr': 0, 'weight_decay': -1, 'maximize': 'maybe', 'foreach': 'maybe',
     'differentiable': 'maybe', 'fused': 'maybe', 'betas': 'x', 'eps': 0, 'amsgrad': 'maybe',
     'capturable': 'maybe', 'decoupled_weight_decay': 'maybe'}),
    ('mocov2_r18_tiny.py', 'AdamW', 'optim_wrapper.optimizer',
     {'lr': -1, 'weight_decay': -1e-09, 'maximize': 2, 'foreach': 2, 'differentiable': 2, 'fused':
     2, 'betas': [], 'eps': -1, 'amsgrad': 2, 'capturable': 2, 'decoupled_weight_decay': 2}),
    ('imix_r18_digits.py', None, 'optim_wrapper.optimizer',
     {'lr': nan, 'weight_decay': nan, 'momentum': 1, 'dampening': -0.1, 'nesterov': 'maybe'}),
    ('mocov2_r18_tiny.py', None, 'train_dataloader',
     {'batch_size': 0, 'shuffle': True, 'num_workers': -1, 'pin_memory': 'maybe', 'drop_last':
     'maybe', 'timeout': -1, 'multiprocessing_context': 'no-such-choice', 'prefetch_factor': 0,
     'persistent_workers': 'maybe', 'in_order': 'maybe', 'num_batch_per_epoch': 0,
     'disable_subprocess_warning': 'maybe'}),
]


def put(tree: dict, path: str, value) -> None:
    *parents, last = path.split('.')
    for part in parents:
        tree = tree[int(part)] if isinstance(tree, list) else tree[part]
    tree[int(last) if isinstance(tree, list) else last] = value


def placed(config: str, place) -> dict:
    cfg = load(config)
    if place is not None:
        put(cfg, *copy.deepcopy(PLACES[place]))
    return cfg


@pytest.mark.slow
def test_every_place_is_valid_before_the_bad_value():
    failures = [f'{config} {place}: {why}' for config, place, _, _ in CASES
                for why in [refusal(placed(config, place), '')] if why != 'accepted']
    assert not failures, '\n'.join(failures)


@pytest.mark.slow
def test_every_case_is_one_line_naming_the_key():
    failures = []
    for config, place, path, bad in CASES:
        for key, value in bad.items():
            cfg, where = placed(config, place), f'{path}.{key}' if path else key
            put(cfg, where, copy.deepcopy(value))
            why = refusal(cfg, where)
            if why:
                failures.append(f'{config} {place or ""} {where}={value!r}: {why}')
    count = sum(len(bad) for _, _, _, bad in CASES)
    assert not failures, f'{len(failures)} of {count}:\n' + '\n'.join(failures)


def test_a_legal_value_is_not_counted_as_refused():
    """The walk above can fail: a value in range is reported as accepted."""
    cfg = load('mocov2_r18_tiny.py')
    assert refusal(cfg, 'model.temperature') == 'accepted'
    cfg['model']['temperature'] = 0
    assert refusal(cfg, 'model.temperature') is None
