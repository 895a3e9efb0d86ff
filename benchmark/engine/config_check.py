"""Static checks of a config before anything is built: unknown keys, unknown types, bad values.

`validate_config` reads the config only (no files, no data, no model) and raises `ConfigError`
with one line that names the key path, e.g. ``unknown key 'model.temprature' (did you mean
'model.temperature'?)`` or ``train_cfg.max_epochs must be an integer, got 1.5``. The keys a
component accepts come from the ``__init__`` signatures of the classes registered in mmengine's
root registries (``methods`` and ``benchmark`` register there), so a new model argument needs no
change here; the value rules below cover what a signature cannot say (ranges, choices).
Not checkable statically and left to the model: ``queue_size`` >= the total batch (world size).
"""
import importlib
import inspect
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
from benchmark.data.gpu_views import check_view_pairing
from benchmark.data.raw_view import RAW_VIEW, RawImage
from benchmark.data.views import VIEW_NAMES
from benchmark.engine.config_schema import (ConfigError, Rule, _check_component, _check_keys,  # noqa: F401
                                            _check_kwargs, _check_types, _hint, _int_at_least,
                                            _join, _momentum, _non_negative, _number, _one_line,
                                            _one_of, _parameters, _positive, _probability,
                                            _require_dict)
from methods.backbones import build_resnet, RESNETS
from methods.mixco import LAMBDA_DISTRIBUTIONS, LAMBDA_SCOPES, PAIRINGS, TARGET_MODES
from methods.unmix import SCHEDULES

# Top level: Runner's arguments, the keys Runner reads from its cfg (`self.cfg.get(...)`), the
# config file's own keys, and `vis_backends`, a helper variable of configs/_base_/runtime.
RUNNER_CFG_KEYS = ('model_wrapper_cfg', 'sync_bn', 'find_unused_parameters',
                   'activation_checkpointing', 'efficient_conv_bn_eval', 'compile')
CONFIG_KEYS = ('_base_', 'custom_imports', 'vis_backends')
# Runner.register_default_hooks: the names a default_hooks entry overrides.
DEFAULT_HOOK_NAMES = ('runtime_info', 'timer', 'sampler_seed', 'logger', 'param_scheduler',
                      'checkpoint')
SPLITS = ('train', 'val', 'test')


def validate_config(cfg: Config) -> None:
    """Check a loaded config (cfg-options merged) without building anything.

    Raises:
        ConfigError: One line naming the key path, with a did-you-mean where one fits.
    """
    _import_custom_modules(cfg.get('custom_imports'))
    top = {*inspect.signature(Runner.__init__).parameters, *RUNNER_CFG_KEYS, *CONFIG_KEYS}
    _check_keys(cfg, top - {'self', 'cfg'}, '')
    _check_types(cfg, _parameters(Runner)[0], '')
    if cfg.get('model') is None:
        raise ConfigError('model: missing')
    for key, check in SECTIONS.items():
        if cfg.get(key) is not None:
            check(cfg[key], key)
    loader, model_type = cfg.get('train_dataloader') or {}, str(cfg.model.get('type'))
    if model_type.startswith('MixCo') and loader.get('batch_size', 2) % 2:
        raise ConfigError(f"train_dataloader.batch_size must be even for {model_type} (it mixes "
                          f"the two halves of each batch), got {loader['batch_size']}")
    try:  # views on the device need a raw_uint8 dataset, and the other way round
        check_view_pairing(cfg)
    except ValueError as err:
        raise ConfigError(str(err)) from None


# Module paths configs listed before the suite was split into packages (issue 10).
OLD_MODULES = ('benchmark.datasets', 'benchmark.sampler', 'benchmark.hooks',
               'benchmark.knn_monitor', 'benchmark.checkpoint_hook', 'benchmark.preemption',
               'benchmark.tracking', 'benchmark.nan_guard', 'benchmark.linear_metric',
               'methods.linear_probe', 'benchmark.views', 'benchmark.fault_hooks')
IMPORTS_HINT = "custom_imports = dict(imports=['methods', 'benchmark.components'])"


def _custom_import_error(name: str, err: BaseException) -> 'ConfigError':
    if name in OLD_MODULES:
        return ConfigError(f'custom_imports.imports: {name!r} no longer exists; configs import '
                           f'only methods and benchmark.components ({IMPORTS_HINT})')
    return ConfigError(f'custom_imports.imports: cannot import {name!r} ({_one_line(err)})')


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
        raise ConfigError(f'config {path}: {type(err).__name__}: {_one_line(err)}') from None
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
                    parser.exit(2, f'error: {option_string} {item!r}: {_one_line(err)}\n')
                parser.exit(2)


def merge_options(cfg: Config, options: dict) -> None:
    """`cfg.merge_from_dict(options)`, with a merge that cannot apply as one ConfigError line."""
    try:
        cfg.merge_from_dict(options)
    except (KeyError, TypeError, AssertionError) as err:
        raise ConfigError(f'--cfg-options: {_one_line(err)}') from None


def _import_custom_modules(custom: Optional[dict]) -> None:
    """Import what the config registers (Config.fromfile did already; cfg-options may add)."""
    if custom is None:
        return
    _check_keys(custom, {'imports', 'allow_failed_imports'}, 'custom_imports')
    imports = custom.get('imports', [])
    for name in [imports] if isinstance(imports, str) else imports:
        try:
            importlib.import_module(name)
        except ImportError as err:
            if not custom.get('allow_failed_imports', False):
                raise _custom_import_error(name, err) from None


VIEW_TRANSFORMS = {'mocov2': MoCoV2Transform, 'simclr': SimCLRTransform, RAW_VIEW: RawImage}


def _view(value: Any, path: str) -> None:
    """A view preset name, or dict(name=..., **overrides of its lightly transform)."""
    if value is None or isinstance(value, str):
        return None if value is None else _one_of(VIEW_NAMES, 'view')(value, path)
    _require_dict(value, path)
    _one_of(VIEW_NAMES, 'view')(value.get('name'), f'{path}.name')
    if value['name'] in VIEW_TRANSFORMS:
        _check_kwargs(value, VIEW_TRANSFORMS[value['name']], path,
                      supplied={'input_size', 'normalize'}, extra={'name'})
    elif len(value) > 1:
        raise ConfigError(f"{path}: view {value['name']!r} takes no overrides; only "
                          f"{', '.join(VIEW_TRANSFORMS)} do")


MODEL_RULES = dict(temperature=_positive, mix_temperature=_positive, mix_alpha=_positive,
                   mix_weight=_non_negative, key_momentum=_momentum,
                   queue_size=_int_at_least(1), feature_dim=_int_at_least(1),
                   num_classes=_int_at_least(2), mix_lambda=_one_of(LAMBDA_DISTRIBUTIONS),
                   mix_lambda_scope=_one_of(LAMBDA_SCOPES), mix_pairing=_one_of(PAIRINGS),
                   mix_target=_one_of(TARGET_MODES),
                   # i-Mix, Un-Mix, MoCHi (methods/imix.py, unmix.py, mochi.py)
                   mix_schedule=_one_of(SCHEDULES), mix_global_prob=_probability,
                   mix_hardest=_int_at_least(1), mix_synthetic=_int_at_least(0),
                   mix_query_synthetic=_int_at_least(0), mix_warmup_epochs=_int_at_least(0))
BACKBONE_RULES = dict(depth=_one_of(tuple(RESNETS)))
LOADER_RULES = dict(batch_size=_int_at_least(1), num_workers=_int_at_least(0))
DATASET_RULES = dict(input_size=_int_at_least(8), split=_one_of(SPLITS), view=_view)
OPTIMIZER_RULES = dict(lr=_positive, weight_decay=_non_negative, momentum=_non_negative)
LOOP_RULES = dict(max_epochs=_int_at_least(1), max_iters=_int_at_least(1),
                  val_interval=_int_at_least(1))
HOOK_RULES = dict(k=_int_at_least(1), temperature=_positive, num_train=_int_at_least(1),
                  num_test=_int_at_least(1), batch_size=_int_at_least(1))


# --- sections --------------------------------------------------------------------------------

def _check_model(model: Any, path: str) -> None:
    _check_component(model, MODELS, path, MODEL_RULES)
    if isinstance(model.get('backbone'), dict):
        _check_kwargs(model['backbone'], build_resnet, f'{path}.backbone', BACKBONE_RULES)
    if isinstance(model.get('data_preprocessor'), dict):
        _check_component(model['data_preprocessor'], MODELS, f'{path}.data_preprocessor',
                         default_type='BaseDataPreprocessor')


def _check_loader(loader: Any, path: str) -> None:
    """Runner.build_dataloader: its own keys, then DataLoader's; dataset and sampler required."""
    min_batch = 2 if path == 'train_dataloader' else 1
    _check_kwargs(loader, DataLoader, path, dict(LOADER_RULES, batch_size=_int_at_least(min_batch)),
                  extra={'num_batch_per_epoch', 'disable_subprocess_warning'})
    for key in ('dataset', 'sampler'):
        if key not in loader:
            raise ConfigError(f'{path}.{key}: missing')
    _check_component(loader['dataset'], DATASETS, f'{path}.dataset', DATASET_RULES)
    _check_component(loader['sampler'], DATA_SAMPLERS, f'{path}.sampler', supplied={'dataset'})
    if isinstance(loader.get('batch_sampler'), dict):
        _check_component(loader['batch_sampler'], DATA_SAMPLERS, f'{path}.batch_sampler',
                         supplied={'sampler', 'batch_size'})
    if isinstance(loader.get('collate_fn'), dict):
        _check_component(loader['collate_fn'], FUNCTIONS, f'{path}.collate_fn', skip_first=True)


def _check_train_loop(loop: Any, path: str) -> None:
    """Runner.build_train_loop: `type`, or `by_epoch` choosing the epoch or iteration loop."""
    _require_dict(loop, path)
    if 'type' in loop and 'by_epoch' in loop:
        raise ConfigError(f'{path}: give type or by_epoch, not both')
    if 'type' not in loop and 'by_epoch' not in loop:
        raise ConfigError(f'{path}.type: missing (or by_epoch)')
    default = 'EpochBasedTrainLoop' if loop.get('by_epoch') else 'IterBasedTrainLoop'
    _check_component(loop, LOOPS, path, LOOP_RULES, supplied={'runner', 'dataloader'},
                     extra={'by_epoch'} if 'by_epoch' in loop else (), default_type=default)


def _check_eval_loop(loop: Any, path: str) -> None:
    _check_component(loop, LOOPS, path, supplied={'runner', 'dataloader', 'evaluator'},
                     default_type='ValLoop' if path == 'val_cfg' else 'TestLoop')


def _items(section: Any, path: str) -> Iterable[Tuple[Any, str]]:
    """(item, path) of a list section (`custom_hooks.0`, as --cfg-options spells it) or a dict."""
    if isinstance(section, (list, tuple)):
        return [(item, f'{path}.{i}') for i, item in enumerate(section)]
    return [(section, path)]


def _check_evaluator(evaluator: Any, path: str) -> None:
    """Runner.build_evaluator: dict(metrics=...) is an Evaluator, anything else metrics."""
    if isinstance(evaluator, dict) and 'metrics' in evaluator:
        return _check_component(evaluator, EVALUATOR, path, default_type='Evaluator')
    for item, item_path in _items(evaluator, path):
        _check_component(item, METRICS, item_path)


def _check_optim_wrapper(wrapper: Any, path: str) -> None:
    _require_dict(wrapper, path)
    if 'constructor' in wrapper:  # a custom constructor reads the rest its own way
        return
    _check_component(wrapper, OPTIM_WRAPPERS, path, extra={'paramwise_cfg'},
                     default_type='OptimWrapper')
    if 'optimizer' not in wrapper:
        raise ConfigError(f'{path}.optimizer: missing')
    _check_component(wrapper['optimizer'], OPTIMIZERS, f'{path}.optimizer', OPTIMIZER_RULES,
                     supplied={'params'})


def _check_schedulers(schedulers: Any, path: str) -> None:
    for item, item_path in _items(schedulers, path):
        _check_component(item, PARAM_SCHEDULERS, item_path, supplied={'optimizer'},
                         extra={'convert_to_iter_based'})


def _check_default_hooks(hooks: Any, path: str) -> None:
    """Runner.register_default_hooks: None removes a default hook; a dict without type names one."""
    _require_dict(hooks, path)
    for name, hook in hooks.items():
        if isinstance(hook, dict) and 'type' not in hook and name not in DEFAULT_HOOK_NAMES:
            raise ConfigError(f'unknown key {_join(path, name)!r}'
                              f'{_hint(name, DEFAULT_HOOK_NAMES, path)}')
        if hook is not None:
            _check_component(hook, HOOKS, _join(path, name), HOOK_RULES, extra={'priority'})


def _check_custom_hooks(hooks: Any, path: str) -> None:
    if not isinstance(hooks, (list, tuple)):
        raise ConfigError(f'{path} must be a list, got {hooks!r}')
    for item, item_path in _items(hooks, path):
        _check_component(item, HOOKS, item_path, HOOK_RULES, extra={'priority'})


def _check_env(env: Any, path: str) -> None:
    """Runner.setup_env reads these four; dist_cfg goes to init_dist, which takes **kwargs."""
    _require_dict(env, path)
    _check_keys(env, {'cudnn_benchmark', 'mp_cfg', 'dist_cfg', 'resource_limit'}, path)
    if env.get('mp_cfg') is not None:
        _check_kwargs(env['mp_cfg'], set_multi_processing, f'{path}.mp_cfg',
                      supplied={'distributed'})
    if env.get('dist_cfg') is not None:
        _require_dict(env['dist_cfg'], f'{path}.dist_cfg')


def _check_visualizer(visualizer: Any, path: str) -> None:
    _check_component(visualizer, VISUALIZERS, path)
    backends = visualizer.get('vis_backends') or []
    for item, item_path in _items([backends] if isinstance(backends, dict) else backends,
                                  f'{path}.vis_backends'):
        _check_component(item, VISBACKENDS, item_path, extra={'name'})


def _check_auto_scale_lr(auto: Any, path: str) -> None:
    """Runner.scale_lr reads `enable` and, when enabled, `base_batch_size`."""
    _require_dict(auto, path)
    _check_keys(auto, ('enable', 'base_batch_size'), path)
    _check_types(auto, dict(enable=bool), path)
    if 'base_batch_size' in auto:
        _int_at_least(1)(auto['base_batch_size'], f'{path}.base_batch_size')
    elif auto.get('enable'):
        raise ConfigError(f'{path}.base_batch_size: missing')


COMPILE_MODES = ('default', 'reduce-overhead', 'max-autotune', 'max-autotune-no-cudagraphs')


def _check_compile(value: Any, path: str) -> None:
    """Runner._maybe_compile: True/False, or torch.compile's keyword arguments (off if absent)."""
    if isinstance(value, bool):
        return
    if not isinstance(value, dict):
        raise ConfigError(f'{path} must be True, False or a dict of torch.compile arguments '
                          f'(e.g. dict(mode=\'max-autotune\')), got {value!r}')
    _check_kwargs(value, torch.compile, path, dict(mode=_one_of(COMPILE_MODES, 'mode')),
                  supplied={'model'})


SECTIONS: Dict[str, Rule] = dict(
    compile=_check_compile,
    model=_check_model,
    train_dataloader=_check_loader, val_dataloader=_check_loader, test_dataloader=_check_loader,
    train_cfg=_check_train_loop, val_cfg=_check_eval_loop, test_cfg=_check_eval_loop,
    val_evaluator=_check_evaluator, test_evaluator=_check_evaluator,
    optim_wrapper=_check_optim_wrapper, param_scheduler=_check_schedulers,
    default_hooks=_check_default_hooks, custom_hooks=_check_custom_hooks,
    env_cfg=_check_env, visualizer=_check_visualizer, auto_scale_lr=_check_auto_scale_lr,
    randomness=lambda section, path: _check_kwargs(
        section, Runner.set_randomness, path, dict(seed=_int_at_least(0, none_ok=True)),
        skip_first=True),
    log_processor=lambda section, path: _check_component(
        section, LOG_PROCESSORS, path, dict(window_size=_int_at_least(1)),
        default_type='LogProcessor'),
    model_wrapper_cfg=lambda section, path: _check_component(
        section, MODEL_WRAPPERS, path, supplied={'module'}),
)
