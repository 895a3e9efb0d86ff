"""`validate_config`: what a config names, built through mmengine's registries without data (the
model on the meta device, optimizer, schedulers, hooks, metrics, log processor, vis backends,
loaders over a stand-in dataset; the rest: its signature), then the rules across keys (rules.py).
A refusal is one `ConfigError` line naming the key path."""
import collections
import copy
import inspect
import json
import os
import warnings
from typing import Any, Callable, Iterable, Optional, Union

import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import (DATA_SAMPLERS, DATASETS, EVALUATOR, FUNCTIONS, HOOKS, LOG_PROCESSORS,
                               LOOPS, METRICS, MODEL_WRAPPERS, MODELS, OPTIM_WRAPPERS, OPTIMIZERS,
                               PARAM_SCHEDULERS, VISBACKENDS, VISUALIZERS, Registry)
from mmengine.runner import Runner
from mmengine.runner.priority import Priority, get_priority
from mmengine.utils.dl_utils import set_multi_processing
from torch.utils.data import DataLoader

from benchmark.cli import did_you_mean
from benchmark.engine.config.keywords import (ConfigError, accepted, check_call, check_keys,
                                              lookup, refused, require_dict)
from benchmark.engine.config.rules import check_run, check_values
from benchmark.engine.train_views import place_views
from methods.backbones import build_resnet

DEFAULT_HOOK_NAMES = ('runtime_info', 'timer', 'sampler_seed', 'logger', 'param_scheduler',
                      'checkpoint')  # Runner.register_default_hooks: what default_hooks override
STAND_IN = range(256)  # the dataset a loader is built over: indices, no file
# The models built last, by their section (a suite checks a few configs for many runs).
BUILT_MODELS, KEPT_MODELS = collections.OrderedDict(), 8


# Keys the Runner reads besides its arguments (custom_imports, _base_, vis_backends: the file's).
RUNNER_KEYS = dict(model_wrapper_cfg=Optional[dict], sync_bn=Optional[str], custom_imports=dict,
                   find_unused_parameters=bool, compile=Union[bool, dict], _base_=Any,
                   activation_checkpointing=Any, efficient_conv_bn_eval=Any, vis_backends=Any)
# The sections the Runner reads key by key (a signature or {key: types}) or builds (a registry;
# the log processor built, the others by keywords): (path, that, default type, keys it passes).
SECTIONS = [('env_cfg', dict(cudnn_benchmark=bool, mp_cfg=Optional[dict], dist_cfg=Optional[dict],
                             resource_limit=int), None, ()),
            ('env_cfg.mp_cfg', set_multi_processing, None, ('distributed',)),
            ('randomness', Runner.set_randomness, None, ('self',)),
            ('auto_scale_lr', dict(enable=bool, base_batch_size=Optional[int]), None, ()),
            ('compile', torch.compile, None, ('model',)),
            ('model_wrapper_cfg', MODEL_WRAPPERS, None, ('module',)),
            ('log_processor', LOG_PROCESSORS, 'LogProcessor', ()),
            ('visualizer', VISUALIZERS, None, ())]


def typed(registry: Any, section: Any, path: str, default_type: Optional[str] = None,
          skip: Union[Iterable[str], Callable] = (), extra: Iterable[str] = ()) -> Any:
    """The type `section` names in `registry`, once its keys (but `skip` or `skip(type)`) fit it."""
    require_dict(section, path)
    if 'type' not in section and default_type is None:
        raise ConfigError(f'{path}.type: missing')
    cls = lookup(registry, section.get('type', default_type), path)
    check_call(section, cls, path, skip(cls) if callable(skip) else skip,
               {*extra, 'type', '_scope_'})
    return cls


def build(registry: Any, section: Any, path: str, default_type: Optional[str] = None,
          skip: Iterable[str] = (), extra: Iterable[str] = (), drop: Iterable[str] = (),
          **default_args: Any) -> Any:
    """``registry.build`` of `section` once it is `typed` (less `drop`: mmengine takes them out)."""
    cls = typed(registry, section, path, default_type, skip, extra)
    return attempt(lambda given: registry.build(dict(
        {k: copy.deepcopy(v) for k, v in given.items() if k not in drop}, type=cls),
        default_args=default_args or None), section, path, cls)


def attempt(make: Callable[[dict], Any], section: dict, path: str, owner: Any) -> Any:
    """``make(section)``, its error as one line (`refused`)."""
    try:
        return make(section)
    except Exception as err:  # noqa: BLE001 - any refusal of the constructor is one line
        names = accepted(owner)[0] if callable(owner) else ()
        raise refused(err, section, path, owner, names, retry=make) from None


def bind(check: Callable, section: dict, path: str, owner: Any, *first: Any) -> None:
    """``check(*first, **section)`` without its type (a signature's bind), as `attempt`."""
    attempt(lambda given: check(*first, **{k: copy.deepcopy(v) for k, v in given.items()
                                           if k not in ('type', '_scope_')}), section, path, owner)


def items(section: Any, path: str) -> list:
    """(item, path) of a list section (``custom_hooks.0``, as --cfg-options spells it) or a dict."""
    return [(item, f'{path}.{i}') for i, item in enumerate(section)] if isinstance(
        section, (list, tuple)) else [(section, path)]


def check_model(model: Any) -> torch.nn.Module:
    require_dict(model, 'model')
    if isinstance(model.get('backbone'), dict):
        check_call(model['backbone'], build_resnet, 'model.backbone')
    if isinstance(model.get('data_preprocessor'), dict):
        typed(MODELS, model['data_preprocessor'], 'model.data_preprocessor', 'BaseDataPreprocessor')
    key = json.dumps(model, sort_keys=True, default=repr)
    if key not in BUILT_MODELS:  # on the meta device: tensors without storage (values unused)
        with torch.device('meta'):
            BUILT_MODELS[key] = build(MODELS, model, 'model')
        if len(BUILT_MODELS) > KEPT_MODELS:
            BUILT_MODELS.popitem(last=False)
    BUILT_MODELS.move_to_end(key)
    return BUILT_MODELS[key]


def check_optimizer(cfg: dict, model: torch.nn.Module) -> None:
    """The optimizer wrapper on the model's parameters, then the schedulers on it."""
    path, wrapper = 'optim_wrapper', cfg['optim_wrapper']
    require_dict(wrapper, path)
    if 'constructor' not in wrapper:  # a custom constructor reads the rest its own way
        typed(OPTIM_WRAPPERS, wrapper, path, 'OptimWrapper', extra={'paramwise_cfg'})
        if 'optimizer' not in wrapper:
            raise ConfigError(f'{path}.optimizer: missing')
        typed(OPTIMIZERS, wrapper['optimizer'], f'{path}.optimizer', skip={'params'})
        clip = wrapper.get('clip_grad')
        if isinstance(clip, dict) and clip.get('type', 'norm') in ('norm', 'value'):
            clip_fn = getattr(torch.nn.utils, f"clip_grad_{clip.get('type', 'norm')}_")
            check_call(clip, clip_fn, f'{path}.clip_grad', skip={'parameters'}, extra={'type'})
            bind(inspect.signature(clip_fn).bind, clip, f'{path}.clip_grad', clip_fn, [])
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


def check_hooks(defaults: dict, custom: list, cfg: dict) -> None:
    """Default hooks by a Runner's name (or a type), then custom ones; `check_config` sees all."""
    check_keys({n: h for n, h in defaults.items() if isinstance(h, dict) and 'type' not in h},
               DEFAULT_HOOK_NAMES, 'default_hooks')
    for hook, path in [(h, f'default_hooks.{n}') for n, h in defaults.items() if h is not None] \
            + items(custom, 'custom_hooks'):
        require_dict(hook, path)
        try:
            get_priority(hook.get('priority', 'NORMAL'))
        except KeyError:
            raise ConfigError(f"{path}.priority: unknown priority {hook['priority']!r}"
                              f"{did_you_mean(hook['priority'], Priority.__members__)}; valid: "
                              f"{', '.join(Priority.__members__)} or 0-100") from None
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{path}.priority={hook['priority']!r}: {err}") from None
        built = build(HOOKS, hook, path, extra={'priority'}, drop={'priority'})
        getattr(built, 'check_config', lambda whole: None)(cfg)  # its own refusals, one line


def check_loader(loader: Any, path: str, cfg: dict) -> None:
    """Runner.build_dataloader over the stand-in dataset, once the dataset's arguments hold."""
    check_call(loader, DataLoader, path, extra={'num_batch_per_epoch',
                                                 'disable_subprocess_warning'})
    for key in ('dataset', 'sampler'):
        if key not in loader:
            raise ConfigError(f'{path}.{key}: missing')
    cls = typed(DATASETS, loader['dataset'], f'{path}.dataset')
    bind(getattr(cls, 'check_arguments', inspect.signature(cls).bind), loader['dataset'],
         f'{path}.dataset', cls)  # a dataset's check_arguments: the views, no file read
    typed(DATA_SAMPLERS, loader['sampler'], f'{path}.sampler', skip={'dataset'})
    if isinstance(loader.get('batch_sampler'), dict):
        typed(DATA_SAMPLERS, loader['batch_sampler'], f'{path}.batch_sampler',
              skip={'sampler', 'batch_size'})
    for key in ('collate_fn', 'worker_init_fn'):  # its first argument is the DataLoader's
        if isinstance(loader.get(key), dict):
            typed(FUNCTIONS, loader[key], f'{path}.{key}', skip=lambda fn: [*accepted(fn)[0]][:1])
    seed = (cfg.get('randomness') or {}).get('seed')  # given, it spares the sampler drawing one
    attempt(lambda given: Runner.build_dataloader(
        dict(copy.deepcopy(given), dataset=STAND_IN), seed=seed if isinstance(seed, int) else 0),
        loader, path, DataLoader)


def check_loop(loop: Any, path: str, cfg: dict) -> None:
    """Runner.build_*_loop's keywords: `type`, or (training) `by_epoch`: the epoch or iter loop."""
    require_dict(loop, path)
    default = {'val_cfg': 'ValLoop', 'test_cfg': 'TestLoop'}.get(path)
    if path == 'train_cfg':
        if ('type' in loop) == ('by_epoch' in loop):
            raise ConfigError(f'{path}.by_epoch: give type or by_epoch, not both' if 'type' in loop
                              else f'{path}.type: missing (or by_epoch)')
        default = 'EpochBasedTrainLoop' if loop.get('by_epoch') else 'IterBasedTrainLoop'
    typed(LOOPS, loop, path, default, {'runner', 'dataloader', 'evaluator'}, {'by_epoch'})


def check_evaluator(evaluator: Any, path: str, cfg: dict) -> None:
    """Runner.build_evaluator: dict(metrics=...) is an Evaluator, anything else metrics."""
    if isinstance(evaluator, dict) and 'metrics' in evaluator:
        typed(EVALUATOR, evaluator, path, 'Evaluator')
        evaluator, path = evaluator['metrics'], f'{path}.metrics'
    for item, item_path in items(evaluator, path):
        build(METRICS, item, item_path)


def check_sections(cfg: dict) -> None:
    """Every section a run builds, in the order the Runner builds them."""
    keys = {k: p.annotation for k, p in accepted(Runner)[0].items() if k != 'cfg'} | RUNNER_KEYS
    check_keys(cfg, keys, '')
    check_call({k: v for k, v in cfg.items() if v is not None}, keys, '')  # None: not set
    if cfg.get('model') is None:
        raise ConfigError('model: missing')
    for path, kind, default, skip in SECTIONS:  # a section None or (keywords) no dict: not set
        *parent, key = path.split('.')
        section = (cfg.get(parent[0]) or {} if parent else cfg).get(key)
        if isinstance(kind, Registry) and section is not None:
            (build if key == 'log_processor' else typed)(kind, section, path, default, skip)
        elif isinstance(section, dict) and not isinstance(kind, Registry):
            check_call(section, kind, path, skip)
            if path == 'auto_scale_lr' and section.get('enable') and (
                    'base_batch_size' not in section):
                raise ConfigError(f'{path}.base_batch_size: missing')
    backends = (cfg.get('visualizer') or {}).get('vis_backends') or []
    for item, item_path in items([backends] if isinstance(backends, dict) else backends,
                                 'visualizer.vis_backends'):
        build(VISBACKENDS, item, item_path, extra={'name'}, drop={'name'}, save_dir='.')
    model = check_model(cfg['model'])
    if cfg.get('optim_wrapper') is not None:
        check_optimizer(cfg, model)
    check_hooks(cfg.get('default_hooks') or {}, cfg.get('custom_hooks') or [], cfg)
    for check, suffix in ((check_loop, 'cfg'), (check_loader, 'dataloader'),
                          (check_evaluator, 'evaluator')):
        for key in (f'{split}_{suffix}' for split in ('train', 'val', 'test')):
            if cfg.get(key) is not None:
                check(cfg[key], key, cfg)


def validate_config(cfg: Config, world_size: Optional[int] = None,
                    cuda: Optional[bool] = None) -> None:
    """Check a loaded config (left as it is) for a run of `world_size` processes (default:
    torchrun's WORLD_SIZE, else 1) training on CUDA where `cuda` (default: where available)."""
    top = cfg.to_dict() if isinstance(cfg, Config) else copy.deepcopy(dict(cfg))
    check_values(top)
    place_views(top, torch.cuda.is_available() if cuda is None else cuda)  # as the run will
    with warnings.catch_warnings():  # e.g. torch's on more workers than cores: the run warns
        warnings.simplefilter('ignore')
        check_sections(top)
    check_run(top, int(os.environ.get('WORLD_SIZE', '1')) if world_size is None else world_size)

