"""What no constructor can refuse: rules across keys, and values nobody else checks.

A pretraining method has its row in the vocabulary (benchmark/names.py). Across keys: no NaN
or infinity anywhere, a train batch of two images at least (and an even one for MixCo, which
mixes its halves), a MoCo queue that holds one step's keys of every process,
and a batch that MoCo's split shuffle-BN divides into ``model.bn_splits`` groups (the device
views and their raw dataset: views.py). Values: `UNCHECKED`, the few keys only mmengine's Runner
reads, or that mmengine and torch accept although a run cannot use them. Each failure is one
`ConfigError` line naming the key path.
"""
import fnmatch
import math
import os.path as osp
from typing import Any, Callable

from mmengine.registry import MODELS

from benchmark.engine.compile_hook import COMPILE_MODES
from benchmark.engine.config.keywords import ConfigError, accepted, hint, nodes
from benchmark.names import EVALUATION_MODELS, METHOD_NAMES
from methods.base import EncoderModel

Rule = Callable[[Any, str], None]


def number(low: float, high: float = math.inf, whole: bool = False, low_open: bool = False,
           high_open: bool = True, none: bool = False) -> Rule:
    """A number (an integer where `whole`) from `low` to `high` (None too where `none`)."""
    shown = (f"{'>' if low_open else '>='} {low}" if high == math.inf else
             f"in {'([' [not low_open]}{low}, {high}{')]'[not high_open]}")

    def rule(value: Any, path: str) -> None:
        if value is None and none:
            return
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
            raise ConfigError(f"{path} must be {'an integer' if whole else 'a number'}, "
                              f'got {value!r}')
        if value < low or value > high or (value == low and low_open) or (
                value == high and high_open):
            raise ConfigError(f'{path} must be {shown}, got {value}')
    return rule


COUNT, SIZE, POSITIVE = number(0, whole=True), number(1, whole=True), number(0, low_open=True)


def choice(*options: Any) -> Rule:
    def rule(value: Any, path: str) -> None:
        if not any(type(value) is type(option) and value == option for option in options):
            valid = [str(o) for o in options if o is not None]
            raise ConfigError(f'{path}: unknown value {value!r}{hint(value, valid)}; valid: '
                              f"{', '.join(valid)}")
    return rule


def steps(pairs: bool = False) -> Rule:
    """Increasing integers >= 1, at least one (milestones); or [milestone, interval] pairs."""
    def rule(value: Any, path: str) -> None:
        if pairs and value is None:
            return
        if not isinstance(value, (list, tuple)) or not (value or pairs):
            raise ConfigError(f'{path} must be a non-empty list, got {value!r}')
        for i, item in enumerate(value):
            if pairs and not (isinstance(item, (list, tuple)) and len(item) == 2):
                raise ConfigError(f'{path}.{i} must be a [milestone, interval] pair, got {item!r}')
            for j, step in enumerate(item if pairs else [item]):
                SIZE(step, f'{path}.{i}' + (f'.{j}' if pairs else ''))
        firsts = [item[0] if pairs else item for item in value]
        if firsts != sorted(set(firsts)):
            raise ConfigError(f'{path} must increase, got {list(value)}')
    return rule


def checkpoint_file(value: Any, path: str) -> None:
    """None, or a file that exists (a stat: it is read when training starts)."""
    if value is not None and not (isinstance(value, str) and osp.isfile(value)):
        raise ConfigError(f'{path}: checkpoint {value} not found')


# Keys only mmengine's Runner reads, and values mmengine and torch accept but a run cannot use
# (a zero interval divides by zero, a zero learning rate trains nothing, a momentum of 1 never
# moves); '*' stands for any keys in between.
UNCHECKED = {
    'launcher': choice('none', 'pytorch', 'slurm', 'mpi'),
    'log_level': choice('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'),
    'load_from': checkpoint_file,
    'randomness.seed': number(0, 2 ** 32, whole=True, none=True),  # numpy's range
    'env_cfg.mp_cfg.mp_start_method': choice(None, 'fork', 'spawn', 'forkserver'),
    'env_cfg.mp_cfg.opencv_num_threads': COUNT, 'env_cfg.resource_limit': SIZE,
    'auto_scale_lr.base_batch_size': SIZE, '*_dataloader.num_batch_per_epoch': SIZE,
    'train_cfg.max_epochs': SIZE, 'train_cfg.max_iters': SIZE, 'train_cfg.val_begin': SIZE,
    'train_cfg.val_interval': SIZE, 'train_cfg.dynamic_intervals': steps(pairs=True),
    'default_hooks.logger.interval': SIZE, 'log_processor.window_size': SIZE,
    'log_processor.num_digits': COUNT,
    'log_processor.custom_cfg*.method_name': choice('mean', 'min', 'max', 'current'),
    'param_scheduler*.T_max': number(1, whole=True, none=True), 'param_scheduler*.begin': COUNT,
    'param_scheduler*.convert_to_iter_based': choice(True, False),
    'param_scheduler*.step_size': SIZE, 'param_scheduler*.milestones': steps(),
    'param_scheduler*.gamma': POSITIVE, 'param_scheduler*.eta_min*': number(0, none=True),
    'param_scheduler*factor': number(0, 1, low_open=True, high_open=False),  # Constant, Linear
    'optim_wrapper.optimizer.lr': POSITIVE, 'optim_wrapper.optimizer.eps': POSITIVE,
    'optim_wrapper.optimizer.momentum': number(0, 1),
    'optim_wrapper.optimizer.dampening': number(0, 1, high_open=False),
    'optim_wrapper.paramwise_cfg*mult': number(0), 'optim_wrapper.clip_grad.max_norm': POSITIVE,
    '*_dataloader.prefetch_factor': number(1, whole=True, none=True),
    'compile.mode': choice(None, *COMPILE_MODES), 'sync_bn': choice(None, 'torch', 'mmcv'),
}


def check_unchecked(cfg: dict) -> None:
    for path, value in nodes(cfg):
        for pattern, rule in UNCHECKED.items():
            if fnmatch.fnmatchcase(path, pattern):
                rule(value, path)


def check_finite(cfg: dict) -> None:
    """No NaN or infinity anywhere a number is given (--cfg-options reads 'nan' and 'inf')."""
    for path, value in nodes(cfg):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f'{path} must be a finite number, got {value}')


def check_method_named(cfg: dict) -> None:
    """A pretraining method (an `EncoderModel`) has its row in the vocabulary: its records,
    tables and baselines are keyed by the record name that row gives."""
    kind = cfg['model'].get('type')
    cls = MODELS.get(kind) if isinstance(kind, str) else kind
    name = getattr(cls, '__name__', kind)
    if isinstance(cls, type) and issubclass(cls, EncoderModel) and name not in (
            *METHOD_NAMES, *EVALUATION_MODELS):
        raise ConfigError(f'model.type={name!r} has no row in METHODS of benchmark/names.py; add '
                          f"'{name}': (record name, table label) there (docs/methods.md, "
                          '"Adding a method")')


def check_batch(cfg: dict, world_size: int) -> None:
    """The train batch against the model: two images at least (a contrastive loss needs others
    in the batch), even for MixCo, held by the queue, divided by the shuffle-BN groups."""
    model, loader = cfg['model'], cfg.get('train_dataloader') or {}
    batch, kind = loader.get('batch_size'), str(model.get('type'))
    if not isinstance(batch, int):
        return
    if batch < 2:
        raise ConfigError(f'train_dataloader.batch_size must be >= 2, got {batch}')
    if kind.startswith('MixCo') and batch % 2:
        raise ConfigError(f'train_dataloader.batch_size must be even for {kind} (it mixes '
                          f'the two halves of each batch), got {batch}')
    cls = MODELS.get(kind) if isinstance(model.get('type'), str) else None
    params = accepted(cls)[0] if cls is not None else {}
    setting = {k: model.get(k, params[k].default) for k in ('queue_size', 'shuffle_bn',
                                                            'bn_splits') if k in params}
    queue, total = setting.get('queue_size'), world_size * batch
    if isinstance(queue, int) and queue < total:
        raise ConfigError(f'model.queue_size ({queue}) must be >= the total batch, {world_size} '
                          f'process(es) x train_dataloader.batch_size {batch} = {total}; raise '
                          'model.queue_size or lower the batch')
    mode, splits = setting.get('shuffle_bn'), setting.get('bn_splits')
    split = mode == 'split' or (mode == 'auto' and world_size == 1)
    if split and isinstance(splits, int) and splits > 0 and batch % splits:
        raise ConfigError(f'train_dataloader.batch_size ({batch}) must be divisible by '
                          f'model.bn_splits ({splits}): with {world_size} process(es) and '
                          f'model.shuffle_bn={mode!r} the key encoder normalises each batch in '
                          f"{splits} groups; change either, or set model.shuffle_bn='off'")
