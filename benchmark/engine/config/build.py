"""Build what a config names through mmengine's registries, without data: the model on torch's
meta device (the last one kept: a suite checks one config for many runs), the optimizer wrapper
and schedulers on it, hooks, metrics, log processor and visualisation backends; each loader over
a stand-in dataset of indices, its dataset's arguments bound to the dataset's signature (and its
``check_arguments``: the views, no file read). Loops, the visualizer and the sections the
Runner reads key by key are checked against their signatures."""
import copy
import inspect
import json
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

import torch
from mmengine.optim import build_optim_wrapper
from mmengine.registry import (DATA_SAMPLERS, DATASETS, EVALUATOR, FUNCTIONS, HOOKS, LOG_PROCESSORS,
                               LOOPS, METRICS, MODEL_WRAPPERS, MODELS, OPTIM_WRAPPERS, OPTIMIZERS,
                               PARAM_SCHEDULERS, VISBACKENDS, VISUALIZERS)
from mmengine.runner import Runner
from mmengine.runner.priority import Priority, get_priority
from mmengine.utils.dl_utils import set_multi_processing
from torch.utils.data import DataLoader

from benchmark.engine.config.keywords import (ConfigError, accepted, check_call, check_keys,
                                              hint, lookup, refused, require_dict)
from methods.backbones import build_resnet

# Runner.register_default_hooks: the names a default_hooks entry overrides.
DEFAULT_HOOK_NAMES = ('runtime_info', 'timer', 'sampler_seed', 'logger', 'param_scheduler',
                      'checkpoint')
STAND_IN = range(256)  # the dataset a loader is built over: indices, no file
LAST_MODEL: dict = {}


def config_keys(model_wrapper_cfg: Optional[dict] = None, sync_bn: Optional[str] = None,
                find_unused_parameters: bool = False, compile: Union[bool, dict] = False,
                activation_checkpointing: Any = None, efficient_conv_bn_eval: Any = None,
                custom_imports: Optional[dict] = None, _base_: Any = None,
                vis_backends: Any = None) -> None:
    """The keys the Runner reads besides its arguments; the last three are the file's."""


def env_cfg(cudnn_benchmark: bool = False, mp_cfg: Optional[dict] = None,
            dist_cfg: Optional[dict] = None, resource_limit: int = 4096) -> None:
    """The keys of env_cfg Runner.setup_env reads."""


def auto_scale_lr(enable: bool = False, base_batch_size: Optional[int] = None) -> None:
    """The keys of auto_scale_lr Runner.scale_lr reads."""


def build(registry: Any, section: dict, path: str, default_type: Optional[str] = None,
          skip: Iterable[str] = (), extra: Iterable[str] = (), build_it: bool = True,
          drop: Iterable[str] = (), **default_args: Any) -> Tuple[Any, Any]:
    """``registry.build(section)`` (less the keys in `drop`, which mmengine takes out first)
    after its keywords are checked: (the type, what it built)."""
    require_dict(section, path)
    if 'type' not in section and default_type is None:
        raise ConfigError(f'{path}.type: missing')
    cls = lookup(registry, section.get('type', default_type), path)
    check_call(section, cls, path, skip, {*extra, 'type', '_scope_'})
    if not build_it:
        return cls, None
    def make(given: dict) -> Any:
        args = {k: copy.deepcopy(v) for k, v in given.items() if k not in drop}
        return registry.build(dict(args, type=cls), default_args=default_args or None)
    return cls, attempt(make, section, path, cls)


def attempt(make: Callable[[dict], Any], section: dict, path: str, owner: Any) -> Any:
    """``make(section)``, its error as one line (`refused`)."""
    try:
        return make(section)
    except Exception as err:  # noqa: BLE001 - any refusal of the constructor is one line
        names = accepted(owner)[0] if callable(owner) else ()
        raise refused(err, section, path, owner, names, retry=make) from None


def items(section: Any, path: str) -> List[Tuple[Any, str]]:
    """(item, path) of a list section (``custom_hooks.0``, as --cfg-options spells it) or a dict."""
    if isinstance(section, (list, tuple)):
        return [(item, f'{path}.{i}') for i, item in enumerate(section)]
    return [(section, path)]


def check_model(model: Any) -> torch.nn.Module:
    require_dict(model, 'model')
    if isinstance(model.get('backbone'), dict):
        check_call(model['backbone'], build_resnet, 'model.backbone')
    if isinstance(model.get('data_preprocessor'), dict):
        build(MODELS, model['data_preprocessor'], 'model.data_preprocessor',
              'BaseDataPreprocessor', build_it=False)
    key = json.dumps(model, sort_keys=True, default=repr)
    if key not in LAST_MODEL:  # on the meta device: tensors without storage (values unused)
        with torch.device('meta'):
            LAST_MODEL.clear()
            LAST_MODEL[key] = build(MODELS, model, 'model')[1]
    return LAST_MODEL[key]


def check_optimizer(cfg: dict, model: torch.nn.Module) -> None:
    """The optimizer wrapper on the model's parameters, then the schedulers on it."""
    path, wrapper = 'optim_wrapper', cfg['optim_wrapper']
    require_dict(wrapper, path)
    if 'constructor' not in wrapper:  # a custom constructor reads the rest its own way
        build(OPTIM_WRAPPERS, wrapper, path, 'OptimWrapper', extra={'paramwise_cfg'},
              build_it=False)
        if 'optimizer' not in wrapper:
            raise ConfigError(f'{path}.optimizer: missing')
        build(OPTIMIZERS, wrapper['optimizer'], f'{path}.optimizer', skip={'params'},
              build_it=False)
        clip = wrapper.get('clip_grad')
        if isinstance(clip, dict) and clip.get('type', 'norm') in ('norm', 'value'):
            clip_fn = getattr(torch.nn.utils, f"clip_grad_{clip.get('type', 'norm')}_")
            check_call(clip, clip_fn, f'{path}.clip_grad', skip={'parameters'}, extra={'type'})
            attempt(lambda given: inspect.signature(clip_fn).bind(
                [], **{k: v for k, v in given.items() if k != 'type'}), clip, f'{path}.clip_grad',
                clip_fn)
    built = attempt(lambda given: build_optim_wrapper(model, copy.deepcopy(given)), wrapper, path,
                    str(wrapper.get('type', 'OptimWrapper')))
    loop = cfg.get('train_cfg') or {}
    ends = {True: loop.get('max_epochs'), False: loop.get('max_iters')}
    for item, item_path in items(cfg.get('param_scheduler') or [], 'param_scheduler'):
        require_dict(item, item_path)
        end = ends.get(item.get('by_epoch', True)) if 'end' not in item else item['end']
        build(PARAM_SCHEDULERS, dict(item, **({'end': end} if end else {})), item_path,
              skip={'optimizer'}, extra={'convert_to_iter_based'}, optimizer=built,
              epoch_length=1)


def check_hook(hook: Any, path: str) -> None:
    require_dict(hook, path)
    try:
        get_priority(hook.get('priority', 'NORMAL'))
    except KeyError:
        raise ConfigError(f"{path}.priority: unknown priority {hook['priority']!r}"
                          f"{hint(hook['priority'], Priority.__members__)}; valid: "
                          f"{', '.join(Priority.__members__)} or 0-100") from None
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path}.priority={hook['priority']!r}: {err}") from None
    build(HOOKS, hook, path, extra={'priority'}, drop={'priority'})


def check_hooks(defaults: Any, custom: Any) -> None:
    require_dict(defaults, 'default_hooks')
    for name, hook in defaults.items():
        if isinstance(hook, dict) and 'type' not in hook and name not in DEFAULT_HOOK_NAMES:
            raise ConfigError(f"unknown key 'default_hooks.{name}'"
                              f'{hint(name, DEFAULT_HOOK_NAMES, "default_hooks")}')
        if hook is not None:
            check_hook(hook, f'default_hooks.{name}')
    if not isinstance(custom, (list, tuple)):
        raise ConfigError(f'custom_hooks must be a list, got {custom!r}')
    for hook, path in items(custom, 'custom_hooks'):
        check_hook(hook, path)


def check_loader(loader: Any, path: str, randomness: dict) -> None:
    """Runner.build_dataloader over the stand-in dataset, once the dataset's arguments hold."""
    check_call(loader, DataLoader, path, extra={'num_batch_per_epoch',
                                                 'disable_subprocess_warning'})
    for key in ('dataset', 'sampler'):
        if key not in loader:
            raise ConfigError(f'{path}.{key}: missing')
    dataset, where = loader['dataset'], f'{path}.dataset'
    cls, _ = build(DATASETS, dataset, where, build_it=False)
    check = getattr(cls, 'check_arguments', inspect.signature(cls).bind)
    attempt(lambda given: check(**{k: copy.deepcopy(v) for k, v in given.items()
                                   if k not in ('type', '_scope_')}), dataset, where, cls)
    build(DATA_SAMPLERS, loader['sampler'], f'{path}.sampler', skip={'dataset'}, build_it=False)
    if isinstance(loader.get('batch_sampler'), dict):
        build(DATA_SAMPLERS, loader['batch_sampler'], f'{path}.batch_sampler',
              skip={'sampler', 'batch_size'}, build_it=False)
    for key in ('collate_fn', 'worker_init_fn'):  # its first argument is the DataLoader's
        if isinstance(loader.get(key), dict):
            fn, _ = build(FUNCTIONS, loader[key], f'{path}.{key}', build_it=False)
            check_call(loader[key], fn, f'{path}.{key}', skip=list(accepted(fn)[0])[:1],
                       extra={'type', '_scope_'})
    seed = randomness.get('seed')  # the Runner always passes one (drawn where None); a given
    attempt(lambda given: Runner.build_dataloader(  # one spares the sampler drawing (and syncing)
        dict(copy.deepcopy(given), dataset=STAND_IN), seed=seed if isinstance(seed, int) else 0),
        loader, path, DataLoader)


def check_loop(loop: Any, path: str) -> None:
    """Runner.build_*_loop: `type`, or (training) `by_epoch` choosing the epoch or iteration
    loop. Keywords only: a loop needs a runner."""
    require_dict(loop, path)
    default = {'val_cfg': 'ValLoop', 'test_cfg': 'TestLoop'}.get(path)
    if path == 'train_cfg':
        if ('type' in loop) == ('by_epoch' in loop):
            raise ConfigError(f'{path}.by_epoch: give type or by_epoch, not both' if 'type' in loop
                              else f'{path}.type: missing (or by_epoch)')
        default = 'EpochBasedTrainLoop' if loop.get('by_epoch') else 'IterBasedTrainLoop'
    build(LOOPS, loop, path, default, skip={'runner', 'dataloader', 'evaluator'},
          extra={'by_epoch'}, build_it=False)


def check_evaluator(evaluator: Any, path: str) -> None:
    """Runner.build_evaluator: dict(metrics=...) is an Evaluator, anything else metrics."""
    if isinstance(evaluator, dict) and 'metrics' in evaluator:
        build(EVALUATOR, evaluator, path, 'Evaluator', build_it=False)
        evaluator, path = evaluator['metrics'], f'{path}.metrics'
    for item, item_path in items(evaluator, path):
        build(METRICS, item, item_path)


def check_runner_sections(cfg: dict) -> None:
    """The sections the Runner reads key by key (a Visualizer: keywords only, one per name for
    the whole process)."""
    env, auto, visualizer = cfg.get('env_cfg'), cfg.get('auto_scale_lr'), cfg.get('visualizer')
    if env is not None:
        check_call(env, env_cfg, 'env_cfg')
        if env.get('mp_cfg') is not None:
            check_call(env['mp_cfg'], set_multi_processing, 'env_cfg.mp_cfg', skip={'distributed'})
    if cfg.get('randomness') is not None:
        check_call(cfg['randomness'], Runner.set_randomness, 'randomness', skip={'self'})
    if auto is not None:
        check_call(auto, auto_scale_lr, 'auto_scale_lr')
        if auto.get('enable') and 'base_batch_size' not in auto:
            raise ConfigError('auto_scale_lr.base_batch_size: missing')
    if isinstance(cfg.get('compile'), dict):
        check_call(cfg['compile'], torch.compile, 'compile', skip={'model'})
    if cfg.get('model_wrapper_cfg') is not None:
        build(MODEL_WRAPPERS, cfg['model_wrapper_cfg'], 'model_wrapper_cfg', skip={'module'},
              build_it=False)
    if cfg.get('log_processor') is not None:
        build(LOG_PROCESSORS, cfg['log_processor'], 'log_processor', 'LogProcessor')
    if visualizer is not None:
        build(VISUALIZERS, visualizer, 'visualizer', build_it=False)
        backends = visualizer.get('vis_backends') or []
        for item, item_path in items([backends] if isinstance(backends, dict) else backends,
                                     'visualizer.vis_backends'):
            build(VISBACKENDS, item, item_path, extra={'name'}, drop={'name'}, save_dir='.')


def check_sections(cfg: dict) -> None:
    """Every section a run builds, in the order the Runner builds them."""
    params = set(accepted(Runner)[0]) - {'cfg'}
    check_keys(cfg, params | set(accepted(config_keys)[0]), '')
    given = {k: v for k, v in cfg.items() if v is not None}  # None: not set
    check_call({k: v for k, v in given.items() if k in params}, Runner, '', skip={'cfg'})
    check_call({k: v for k, v in given.items() if k not in params}, config_keys, '')
    if cfg.get('model') is None:
        raise ConfigError('model: missing')
    check_runner_sections(cfg)
    model = check_model(cfg['model'])
    if cfg.get('optim_wrapper') is not None:
        check_optimizer(cfg, model)
    check_hooks(cfg.get('default_hooks') or {}, cfg.get('custom_hooks') or [])
    for key in ('train_cfg', 'val_cfg', 'test_cfg'):
        if cfg.get(key) is not None:
            check_loop(cfg[key], key)
    for key in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        if cfg.get(key) is not None:
            check_loader(cfg[key], key, cfg.get('randomness') or {})
    for key in ('val_evaluator', 'test_evaluator'):
        if cfg.get(key) is not None:
            check_evaluator(cfg[key], key)
