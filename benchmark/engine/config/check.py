"""Static checks of a config before anything is built: unknown keys, unknown types, bad values.

`validate_config` reads the config only (no data, no model; paths of checkpoints are stat'ed)
and raises `ConfigError` with one line that names the key path, e.g. ``unknown key
'model.temprature' (did you mean 'model.temperature'?)`` or ``train_cfg.max_epochs must be >= 1,
got 0``. The keys a component accepts come from the ``__init__`` signatures of the classes
registered in mmengine's root registries (``methods`` and ``benchmark`` register there); the
values each key takes come from the field table (config_fields), which has an entry for every
parameter. Checked here across fields: no NaN or infinity anywhere, an even batch for MixCo,
device views with a raw dataset, workers for persistent_workers, a MoCo queue at least the
total batch of all processes, and a batch that MoCo's split shuffle-BN divides into
model.bn_splits groups (the world size comes from torchrun's WORLD_SIZE).
"""
import importlib
import inspect
import math
import os
from typing import Any, Dict, Iterable, Optional, Tuple

import torch
from lightly.transforms import MoCoV2Transform, SimCLRTransform
from mmengine.config import Config, DictAction
from mmengine.registry import (DATA_SAMPLERS, DATASETS, EVALUATOR, FUNCTIONS, HOOKS, LOOPS,
                               LOG_PROCESSORS, METRICS, MODEL_WRAPPERS, MODELS, OPTIM_WRAPPERS,
                               OPTIMIZERS, PARAM_SCHEDULERS, VISBACKENDS, VISUALIZERS)
from mmengine.runner import Runner
from mmengine.utils.dl_utils import set_multi_processing
from torch.utils.data import DataLoader

from benchmark import dist
from benchmark.cli import one_line
from benchmark.engine.config.views import check_view_pairing
from benchmark.data.raw_view import RAW_VIEW, RawImage
from benchmark.data.view_params import PRESETS
from benchmark.data.views import VIEW_NAMES
from benchmark.engine.config.fields import FIELDS, fields_of
from benchmark.engine.config.rules import (ConfigError, Rule, Section, Supplied, hint, int_at_least,
                                           join_path, one_of, optional, with_bad)
from benchmark.engine.config.schema import (check_component, check_keys, check_kwargs,
                                            parameters_of, require_dict)
from methods.backbones import build_resnet

# The top level: Runner's arguments and the keys it reads from cfg; None there means "not set".
TOP_RULES = {key: optional(rule) for key, rule in {**fields_of(Runner), **FIELDS['config']}.items()
             if not isinstance(rule, Supplied)}
# Runner.register_default_hooks: the names a default_hooks entry overrides.
DEFAULT_HOOK_NAMES = ('runtime_info', 'timer', 'sampler_seed', 'logger', 'param_scheduler',
                      'checkpoint')


def validate_config(cfg: Config, world_size: Optional[int] = None) -> None:
    """Check a loaded config (cfg-options merged) without building anything or reading data.

    Args:
        cfg: The config.
        world_size: Processes of the run (default: torchrun's WORLD_SIZE, else 1).

    Raises:
        ConfigError: One line naming the key path, with a did-you-mean where one fits.
    """
    _import_custom_modules(cfg.get('custom_imports'))
    top = cfg.to_dict() if isinstance(cfg, Config) else dict(cfg)
    check_kwargs(top, Runner, '', TOP_RULES, extra=FIELDS['config'])  # the top level
    _check_finite(top, '')
    if cfg.get('model') is None:
        raise ConfigError('model: missing')
    for key, check in SECTIONS.items():
        if cfg.get(key) is not None:
            check(cfg[key], key)
    loader, model_type = cfg.get('train_dataloader') or {}, str(cfg.model.get('type'))
    if model_type.startswith('MixCo') and loader.get('batch_size', 2) % 2:
        raise ConfigError(f"train_dataloader.batch_size must be even for {model_type} (it mixes "
                          f"the two halves of each batch), got {loader['batch_size']}")
    world_size = _world_size() if world_size is None else world_size
    _check_queue(cfg, world_size)
    _check_bn_splits(cfg, world_size)
    try:  # views on the device need a raw_uint8 dataset, and the other way round
        check_view_pairing(cfg)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _world_size() -> int:
    """torchrun's WORLD_SIZE (tools/dist_train.sh sets it for its check as well), else 1."""
    try:
        return max(1, int(os.environ.get('WORLD_SIZE', '1')))
    except ValueError:
        return 1


def _default(cls: type, name: str) -> Any:
    """The default of keyword `name` along the __init__ chain of `cls` (None if it has none)."""
    for owner in cls.__mro__:
        init = owner.__dict__.get('__init__')
        param = inspect.signature(init).parameters.get(name) if init else None
        if param is not None and param.default is not param.empty:
            return param.default
    return None


def _check_finite(value: Any, path: str) -> None:
    """No NaN or infinity anywhere a number is given (--cfg-options reads 'nan' and 'inf')."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f'{path} must be a finite number, got {value}')
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, (list, tuple)) else ())
    for key, item in items:
        _check_finite(item, join_path(path, key))


def _check_queue(cfg: Config, world_size: int) -> None:
    """A MoCo queue holds at least one step's keys of all processes (else the step fails)."""
    model, loader = cfg.model, cfg.get('train_dataloader') or {}
    cls = MODELS.get(model.get('type')) if isinstance(model.get('type'), str) else None
    if cls is None or 'queue_size' not in parameters_of(cls)[0] or 'batch_size' not in loader:
        return
    queue = model.get('queue_size', _default(cls, 'queue_size'))
    total = world_size * loader['batch_size']
    if isinstance(queue, int) and queue < total:
        raise ConfigError(f'model.queue_size ({queue}) must be >= the total batch, {world_size} '
                          f'process(es) x train_dataloader.batch_size {loader["batch_size"]} = '
                          f'{total}; raise model.queue_size or lower the batch')


def _check_bn_splits(cfg: Config, world_size: int) -> None:
    """Where a MoCo-family key encoder splits its batch into BatchNorm groups (shuffle_bn='split',
    or 'auto' in one process), model.bn_splits divides the batch of each process."""
    model, loader = cfg.model, cfg.get('train_dataloader') or {}
    cls = MODELS.get(model.get('type')) if isinstance(model.get('type'), str) else None
    if cls is None or 'bn_splits' not in parameters_of(cls)[0] or 'batch_size' not in loader:
        return
    mode = model.get('shuffle_bn', _default(cls, 'shuffle_bn'))
    splits, batch = model.get('bn_splits', _default(cls, 'bn_splits')), loader['batch_size']
    if not (mode == 'split' or (mode == 'auto' and world_size == 1)):
        return
    if isinstance(splits, int) and isinstance(batch, int) and splits > 0 and batch % splits:
        raise ConfigError(f'train_dataloader.batch_size ({batch}) must be divisible by '
                          f'model.bn_splits ({splits}): with {world_size} process(es) and '
                          f'model.shuffle_bn={mode!r} the key encoder normalises each batch in '
                          f'{splits} groups; change either, or set model.shuffle_bn=\'off\'')


# Module paths that configs of earlier versions of the suite listed in custom_imports.
OLD_MODULES = ('benchmark.datasets', 'benchmark.sampler', 'benchmark.hooks',
               'benchmark.knn_monitor', 'benchmark.checkpoint_hook', 'benchmark.preemption',
               'benchmark.tracking', 'benchmark.nan_guard', 'benchmark.linear_metric',
               'methods.linear_probe', 'benchmark.views', 'benchmark.fault_hooks')
IMPORTS_HINT = "custom_imports = dict(imports=['methods', 'benchmark.components'])"


def _custom_import_error(name: str, err: BaseException) -> 'ConfigError':
    if name in OLD_MODULES:
        return ConfigError(f'custom_imports.imports: {name!r} no longer exists; configs import '
                           f'only methods and benchmark.components ({IMPORTS_HINT})')
    return ConfigError(f'custom_imports.imports: cannot import {name!r} ({one_line(err)})')


def read_config(path: str) -> Config:
    """`Config.fromfile`, with a bad file as one ConfigError line: a missing file, a Python syntax
    error (file and line; mmengine reports '<unknown>' as the file), a module of custom_imports
    that cannot be imported (an old path names benchmark.components)."""
    if not os.path.isfile(path):
        raise ConfigError(f'config {path} not found; see configs/ for the list')
    try:
        cfg = Config.fromfile(path, import_custom_modules=False)
    except SyntaxError as err:
        where = err.filename if err.filename and err.filename != '<unknown>' else path
        line = f', line {err.lineno}' if err.lineno else ''
        raise ConfigError(f'{where}{line}: Python syntax error: {err.msg}') from None
    except (OSError, KeyError, TypeError, ValueError, AttributeError, NameError,
            ImportError) as err:
        raise ConfigError(f'config {path}: {type(err).__name__}: {one_line(err)}') from None
    _import_custom_modules(cfg.get('custom_imports'))  # one line per module that fails
    return cfg


class CfgOptionsAction(DictAction):
    """mmengine's DictAction, but a malformed KEY=VALUE is one `error:` line and exit code 2."""

    def __call__(self, parser, namespace, values, option_string=None):
        for item in values:
            try:
                if '=' not in item or not item.split('=', 1)[0]:
                    raise ValueError('expected KEY=VALUE')
                super().__call__(parser, namespace, [item], option_string)
            except (ValueError, AssertionError) as err:
                if dist.is_main():
                    parser.exit(2, f'error: {option_string} {item!r}: {one_line(err)}\n')
                parser.exit(2)


def merge_options(cfg: Config, options: dict) -> None:
    """`cfg.merge_from_dict(options)`, with a merge that cannot apply as one ConfigError line."""
    try:
        cfg.merge_from_dict(options)
    except (KeyError, TypeError, AssertionError) as err:
        raise ConfigError(f'--cfg-options: {one_line(err)}') from None


def _import_custom_modules(custom: Optional[dict]) -> None:
    """Import what the config registers (Config.fromfile did already; cfg-options may add)."""
    if custom is None:
        return
    check_keys(custom, {'imports', 'allow_failed_imports'}, 'custom_imports')
    imports = custom.get('imports', [])
    for name in [imports] if isinstance(imports, str) else imports:
        try:
            importlib.import_module(name)
        except ImportError as err:
            if not custom.get('allow_failed_imports', False):
                raise _custom_import_error(name, err) from None


VIEW_TRANSFORMS = {'mocov2': MoCoV2Transform, 'simclr': SimCLRTransform, RAW_VIEW: RawImage}


def _view_rule(names: Tuple[str, ...]) -> Rule:
    """A view preset name, or dict(name=..., **overrides of its lightly transform)."""
    def view(value: Any, path: str) -> None:
        if value is None or isinstance(value, str):
            return None if value is None else one_of(names, 'view')(value, path)
        require_dict(value, path)
        one_of(names, 'view')(value.get('name'), f'{path}.name')
        if value['name'] in VIEW_TRANSFORMS:  # the transform's fields are in the table
            check_kwargs(value, VIEW_TRANSFORMS[value['name']], path, extra={'name'})
        elif len(value) > 1:
            raise ConfigError(f"{path}: view {value['name']!r} takes no overrides; only "
                              f"{', '.join(VIEW_TRANSFORMS)} do")
    return with_bad(view, 'bogus', dict(name='bogus'), dict(name='mocov2', min_scale=0))


_view = _view_rule(VIEW_NAMES)


def _device_view(value: Any, path: str) -> None:
    """GPUViewPreprocessor's view: the ranges of a preset's overrides; names and keys are
    check_view_pairing's (view_spec's messages say what the device can draw)."""
    if isinstance(value, dict) and value.get('name') in PRESETS:
        table = fields_of(VIEW_TRANSFORMS[value['name']])
        for key, item in value.items():
            if key in table and not isinstance(table[key], Supplied):
                table[key](item, join_path(path, key))


# --- sections --------------------------------------------------------------------------------

def _check_model(model: Any, path: str) -> None:
    check_component(model, MODELS, path)
    if isinstance(model.get('backbone'), dict):
        check_kwargs(model['backbone'], build_resnet, f'{path}.backbone')
    if isinstance(model.get('data_preprocessor'), dict):
        check_component(model['data_preprocessor'], MODELS, f'{path}.data_preprocessor',
                         dict(view=_device_view), default_type='BaseDataPreprocessor')


def _check_loader(loader: Any, path: str) -> None:
    """Runner.build_dataloader: its own keys, then DataLoader's; dataset and sampler required."""
    min_batch = 2 if path == 'train_dataloader' else 1  # contrastive: other images in the batch
    check_kwargs(loader, DataLoader, path, dict(batch_size=int_at_least(min_batch)))
    for key in ('dataset', 'sampler'):
        if key not in loader:
            raise ConfigError(f'{path}.{key}: missing')
    for key in ('persistent_workers', 'prefetch_factor'):  # torch refuses them without workers
        if loader.get(key) and not loader.get('num_workers'):
            raise ConfigError(f'{path}.{key}={loader[key]} needs {path}.num_workers >= 1 (got '
                              f"{loader.get('num_workers', 0)}); set {key}="
                              f"{'False' if key == 'persistent_workers' else 'None'}")
    check_component(loader['dataset'], DATASETS, f'{path}.dataset', dict(view=_view))
    check_component(loader['sampler'], DATA_SAMPLERS, f'{path}.sampler')
    if isinstance(loader.get('batch_sampler'), dict):
        check_component(loader['batch_sampler'], DATA_SAMPLERS, f'{path}.batch_sampler',
                         supplied={'sampler', 'batch_size'})
    for key in ('collate_fn', 'worker_init_fn'):
        if isinstance(loader.get(key), dict):
            check_component(loader[key], FUNCTIONS, f'{path}.{key}', skip_first=True)


def _check_train_loop(loop: Any, path: str) -> None:
    """Runner.build_train_loop: `type`, or `by_epoch` choosing the epoch or iteration loop."""
    require_dict(loop, path)
    if 'type' in loop and 'by_epoch' in loop:
        raise ConfigError(f'{path}.by_epoch: give type or by_epoch, not both')
    if 'type' not in loop and 'by_epoch' not in loop:
        raise ConfigError(f'{path}.type: missing (or by_epoch)')
    default = 'EpochBasedTrainLoop' if loop.get('by_epoch') else 'IterBasedTrainLoop'
    check_component(loop, LOOPS, path, default_type=default)


def _check_eval_loop(loop: Any, path: str) -> None:
    check_component(loop, LOOPS, path, default_type='ValLoop' if path == 'val_cfg' else 'TestLoop')


def _items(section: Any, path: str) -> Iterable[Tuple[Any, str]]:
    """(item, path) of a list section (`custom_hooks.0`, as --cfg-options spells it) or a dict."""
    if isinstance(section, (list, tuple)):
        return [(item, f'{path}.{i}') for i, item in enumerate(section)]
    return [(section, path)]


def _check_evaluator(evaluator: Any, path: str) -> None:
    """Runner.build_evaluator: dict(metrics=...) is an Evaluator, anything else metrics."""
    if isinstance(evaluator, dict) and 'metrics' in evaluator:
        return check_component(evaluator, EVALUATOR, path, default_type='Evaluator')
    for item, item_path in _items(evaluator, path):
        check_component(item, METRICS, item_path)


def _check_optim_wrapper(wrapper: Any, path: str) -> None:
    require_dict(wrapper, path)
    if 'constructor' in wrapper:  # a custom constructor reads the rest its own way
        return
    check_component(wrapper, OPTIM_WRAPPERS, path, default_type='OptimWrapper')
    if 'optimizer' not in wrapper:
        raise ConfigError(f'{path}.optimizer: missing')
    check_component(wrapper['optimizer'], OPTIMIZERS, f'{path}.optimizer')


def _check_schedulers(schedulers: Any, path: str) -> None:
    for item, item_path in _items(schedulers, path):
        check_component(item, PARAM_SCHEDULERS, item_path)


def _check_default_hooks(hooks: Any, path: str) -> None:
    """Runner.register_default_hooks: None removes a default hook; a dict without type names one."""
    require_dict(hooks, path)
    for name, hook in hooks.items():
        if isinstance(hook, dict) and 'type' not in hook and name not in DEFAULT_HOOK_NAMES:
            raise ConfigError(f'unknown key {join_path(path, name)!r}'
                              f'{hint(name, DEFAULT_HOOK_NAMES, path)}')
        if hook is not None:
            check_component(hook, HOOKS, join_path(path, name))


def _check_custom_hooks(hooks: Any, path: str) -> None:
    if not isinstance(hooks, (list, tuple)):
        raise ConfigError(f'{path} must be a list, got {hooks!r}')
    for item, item_path in _items(hooks, path):
        check_component(item, HOOKS, item_path)


def _check_env(env: Any, path: str) -> None:
    """Runner.setup_env reads these four; dist_cfg goes to init_dist, which takes **kwargs."""
    _check_section(env, path)
    if env.get('mp_cfg') is not None:
        check_kwargs(env['mp_cfg'], set_multi_processing, f'{path}.mp_cfg')
    if env.get('dist_cfg') is not None:
        require_dict(env['dist_cfg'], f'{path}.dist_cfg')


def _check_visualizer(visualizer: Any, path: str) -> None:
    check_component(visualizer, VISUALIZERS, path)
    backends = visualizer.get('vis_backends') or []
    for item, item_path in _items([backends] if isinstance(backends, dict) else backends,
                                  f'{path}.vis_backends'):
        check_component(item, VISBACKENDS, item_path, extra={'name'})


def _check_section(section: Any, path: str) -> None:
    """A section mmengine reads key by key: the keys of its field table, and their rules."""
    require_dict(section, path)
    table = FIELDS[path]
    check_keys(section, table, path)
    for key, value in section.items():
        if not isinstance(table[key], Section):
            table[key](value, join_path(path, key))


def _check_auto_scale_lr(auto: Any, path: str) -> None:
    """Runner.scale_lr reads `enable` and, when enabled, `base_batch_size`."""
    _check_section(auto, path)
    if auto.get('enable') and 'base_batch_size' not in auto:
        raise ConfigError(f'{path}.base_batch_size: missing')


def _check_compile(value: Any, path: str) -> None:
    """Runner._maybe_compile: True/False, or torch.compile's keyword arguments (off if absent)."""
    if isinstance(value, bool):
        return
    if not isinstance(value, dict):
        raise ConfigError(f'{path} must be True, False or a dict of torch.compile arguments '
                          f'(e.g. dict(mode=\'max-autotune\')), got {value!r}')
    check_kwargs(value, torch.compile, path)


SECTIONS: Dict[str, Rule] = dict(
    compile=_check_compile,
    model=_check_model,
    train_dataloader=_check_loader, val_dataloader=_check_loader, test_dataloader=_check_loader,
    train_cfg=_check_train_loop, val_cfg=_check_eval_loop, test_cfg=_check_eval_loop,
    val_evaluator=_check_evaluator, test_evaluator=_check_evaluator,
    optim_wrapper=_check_optim_wrapper, param_scheduler=_check_schedulers,
    default_hooks=_check_default_hooks, custom_hooks=_check_custom_hooks,
    env_cfg=_check_env, visualizer=_check_visualizer, auto_scale_lr=_check_auto_scale_lr,
    randomness=lambda section, path: check_kwargs(section, Runner.set_randomness, path,
                                                   skip_first=True),
    log_processor=lambda section, path: check_component(section, LOG_PROCESSORS, path,
                                                         default_type='LogProcessor'),
    model_wrapper_cfg=lambda section, path: check_component(
        section, MODEL_WRAPPERS, path, supplied={'module'}),
)
