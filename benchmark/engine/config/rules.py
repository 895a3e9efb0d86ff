"""What no constructor refuses, as tables of one line each. `VALUES`: a key pattern ('*': any keys
between) and the rule its value passes. `METHOD`, `BATCH` (and engine/train_views.py's): a test of
the facts and the line said where it returns something true (formatted with them and ``it``)."""
import fnmatch
import math
import re
import os.path as osp
from types import SimpleNamespace
from typing import Any, Callable, List, Tuple

from mmengine.registry import MODELS

from benchmark.cli import did_you_mean
from benchmark.engine.compile_hook import COMPILE_MODES
from benchmark.engine.config.keywords import ConfigError, accepted, nodes
from benchmark.names import EVALUATION_MODELS, METHOD_NAMES
from methods.base import EncoderModel

Rule = Callable[[Any, str], None]
Rows = List[Tuple[Callable[[SimpleNamespace], Any], str]]


def number(shown: str, whole: bool = False, none: bool = False) -> Rule:
    """A number (an integer where `whole`; None too where `none`) as `shown` says: '>= 1', '> 0'
    or an interval, 'in [0, 1)'."""
    low, high = ([float(b) for b in re.findall(r'[\d.]+', shown)] + [math.inf])[:2]
    low_in, high_in = not shown.startswith(('>', 'in (')) or '=' in shown, shown.endswith(']')

    def rule(value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
            if value is None and none:
                return
            raise ConfigError(f"{path} must be {'an integer' if whole else 'a number'}, "
                              f'got {value!r}')
        if value < low or value > high or (value, low_in) == (low, False) or (
                value, high_in) == (high, False):
            raise ConfigError(f'{path} must be {shown}, got {value}')
    return rule


COUNT, SIZE, POSITIVE = number('>= 0', whole=True), number('>= 1', whole=True), number('> 0')


def choice(*options: Any) -> Rule:
    def rule(value: Any, path: str) -> None:
        if not any(type(value) is type(option) and value == option for option in options):
            valid = [str(o) for o in options if o is not None]
            raise ConfigError(f'{path}: unknown value {value!r}{did_you_mean(value, valid)}; '
                              f"valid: {', '.join(valid)}")
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


def finite(value: Any, path: str) -> None:
    """No NaN or infinity anywhere a number is given (--cfg-options reads 'nan' and 'inf')."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f'{path} must be a finite number, got {value}')


# Keys only the Runner reads, and values mmengine and torch take that a run cannot use: a zero
# interval divides by zero, a zero learning rate trains nothing, a momentum of 1 never moves.
VALUES = {
    'launcher': choice('none', 'pytorch', 'slurm', 'mpi'),
    'log_level': choice('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'),
    'load_from': checkpoint_file,
    'randomness.seed': number(f'in [0, {2 ** 32})', whole=True, none=True),  # numpy's range
    'env_cfg.mp_cfg.mp_start_method': choice(None, 'fork', 'spawn', 'forkserver'),
    'env_cfg.mp_cfg.opencv_num_threads': COUNT, 'env_cfg.resource_limit': SIZE,
    'auto_scale_lr.base_batch_size': SIZE, '*_dataloader.num_batch_per_epoch': SIZE,
    'train_cfg.max_epochs': SIZE, 'train_cfg.max_iters': SIZE, 'train_cfg.val_begin': SIZE,
    'train_cfg.val_interval': SIZE, 'train_cfg.dynamic_intervals': steps(pairs=True),
    'default_hooks.logger.interval': SIZE, 'log_processor.window_size': SIZE,
    'log_processor.num_digits': COUNT,
    'log_processor.custom_cfg*.method_name': choice('mean', 'min', 'max', 'current'),
    'param_scheduler*.T_max': number('>= 1', whole=True, none=True),
    'param_scheduler*.begin': COUNT, 'param_scheduler*.convert_to_iter_based': choice(True, False),
    'param_scheduler*.step_size': SIZE, 'param_scheduler*.milestones': steps(),
    'param_scheduler*.gamma': POSITIVE, 'param_scheduler*.eta_min*': number('>= 0', none=True),
    'param_scheduler*factor': number('in (0, 1]'),  # Constant, Linear
    'optim_wrapper.optimizer.lr': POSITIVE, 'optim_wrapper.clip_grad.max_norm': POSITIVE,
    'optim_wrapper.optimizer.eps': POSITIVE, 'optim_wrapper.paramwise_cfg*mult': number('>= 0'),
    'optim_wrapper.optimizer.momentum': number('in [0, 1)'),
    'optim_wrapper.optimizer.dampening': number('in [0, 1]'),
    '*_dataloader.prefetch_factor': number('>= 1', whole=True, none=True),
    'compile.mode': choice(None, *COMPILE_MODES), 'sync_bn': choice(None, 'torch', 'mmcv'),
}

METHOD: Rows = [  # facts of `check_run`: records, tables and baselines are keyed by the row
    (lambda f: f.unnamed,
     "model.type={name!r} has no row in METHODS of benchmark/names.py; add '{name}': (record "
     'name, table label) there (docs/methods.md, "Adding a method")'),
]
BATCH: Rows = [  # facts of `check_run`, where the train batch is an integer
    (lambda f: f.batch < 2, 'train_dataloader.batch_size must be >= 2, got {batch}'),
    (lambda f: f.kind.startswith('MixCo') and f.batch % 2,
     'train_dataloader.batch_size must be even for {kind} (it mixes the two halves of each '
     'batch), got {batch}'),
    (lambda f: isinstance(f.queue, int) and f.queue < f.total,
     'model.queue_size ({queue}) must be >= the total batch, {world_size} process(es) x '
     'train_dataloader.batch_size {batch} = {total}; raise model.queue_size or lower the batch'),
    (lambda f: f.split and isinstance(f.splits, int) and f.splits > 0 and f.batch % f.splits,
     'train_dataloader.batch_size ({batch}) must be divisible by model.bn_splits ({splits}): '
     'with {world_size} process(es) and model.shuffle_bn={mode!r} the key encoder normalises '
     "each batch in {splits} groups; change either, or set model.shuffle_bn='off'"),
]


def refuse(rows: Rows, **facts: Any) -> None:
    """Raise the line of the first row that refuses these facts."""
    given = SimpleNamespace(**facts)
    for test, line in rows:
        if it := test(given):
            raise ConfigError(line.format(it=it, **facts))


def check_values(cfg: dict) -> None:
    """Every number finite, then each value `VALUES` names."""
    for table in ({'*': finite}, VALUES):
        for path, value in nodes(cfg):
            for pattern, rule in table.items():
                if fnmatch.fnmatchcase(path, pattern):
                    rule(value, path)


def check_run(cfg: dict, world_size: int) -> None:
    model, batch = cfg['model'], (cfg.get('train_dataloader') or {}).get('batch_size')
    kind = model.get('type')
    cls = MODELS.get(kind) if isinstance(kind, str) else kind
    name = getattr(cls, '__name__', kind)
    refuse(METHOD, name=name, unnamed=isinstance(cls, type) and issubclass(cls, EncoderModel)
           and name not in (*METHOD_NAMES, *EVALUATION_MODELS))
    if isinstance(batch, int):
        params = accepted(cls)[0] if isinstance(kind, str) and cls is not None else {}
        queue, mode, splits = (model.get(k, params[k].default) if k in params else None
                               for k in ('queue_size', 'shuffle_bn', 'bn_splits'))
        refuse(BATCH, batch=batch, kind=str(kind), world_size=world_size, queue=queue,
               total=world_size * batch, mode=mode, splits=splits,
               split=mode == 'split' or (mode == 'auto' and world_size == 1))
