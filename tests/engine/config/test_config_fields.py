"""benchmark.engine.config.fields: every parameter of every type a config reaches has a rule or a
reason, no entry is stale, and every rule's out-of-range values are refused by validate_config
with one line naming the key (cases generated from the table, so a new field brings its own).
Each test walks its whole table and lists every case that fails."""
import copy
import importlib
import inspect
import re

import torch
from lightly.transforms import MoCoV2Transform, SimCLRTransform
from mmengine import registry as R
from mmengine.config import Config
from mmengine.runner import Runner
from mmengine.utils.dl_utils import set_multi_processing
from torch.utils.data import DataLoader

import benchmark.components  # noqa: F401  registers every type a config can name
import benchmark.harness.faults.hooks  # noqa: F401  the fault campaign's configs name these
from benchmark.engine.config.check import ConfigError, validate_config
from benchmark.engine.config.fields import FIELDS, fields_of, qualified_name
from benchmark.engine.config.rules import Closed, Extra, Free, Section, Supplied
from benchmark.engine.config.schema import parameters_of
from methods.backbones import build_resnet
from tests.conftest import ROOT

CONFIGS = sorted((ROOT / 'configs').glob('*.py')) + sorted((ROOT / 'configs/eval').glob('*.py'))
REGISTRIES = (R.MODELS, R.DATASETS, R.DATA_SAMPLERS, R.FUNCTIONS, R.LOOPS, R.OPTIM_WRAPPERS,
              R.OPTIMIZERS, R.PARAM_SCHEDULERS, R.HOOKS, R.METRICS, R.EVALUATOR, R.VISUALIZERS,
              R.VISBACKENDS, R.LOG_PROCESSORS, R.MODEL_WRAPPERS)
# Types a config gets without naming them (Runner's defaults), and the common swaps the table
# covers beside what configs/ names (another optimizer, scheduler, wrapper, backend, sampler).
DEFAULT_TYPES = ('LogProcessor', 'OptimWrapper', 'Evaluator', 'ValLoop', 'TestLoop',
                 'EpochBasedTrainLoop', 'IterBasedTrainLoop', 'Visualizer', 'BaseDataPreprocessor',
                 'MMDistributedDataParallel', 'DefaultSampler', 'LocalVisBackend', 'CheckpointHook',
                 'LoggerHook', 'IterTimerHook', 'ParamSchedulerHook', 'DistSamplerSeedHook',
                 'RuntimeInfoHook', 'Adam', 'AdamW', 'StepLR', 'LinearLR', 'ConstantLR',
                 'AmpOptimWrapper', 'WandbVisBackend', 'pseudo_collate')
# Owners that are no registered type: functions and sections mmengine reads itself.
FUNCTIONS = (Runner, 'config', 'env_cfg', 'auto_scale_lr', set_multi_processing,
             Runner.set_randomness, torch.compile, DataLoader, build_resnet, MoCoV2Transform,
             SimCLRTransform)


def _registered(name):
    return next(reg.get(name) for reg in REGISTRIES if reg.get(name) is not None)


def _walk(node, path=''):
    """(path, dict) of every dict with a `type` in a config tree."""
    if isinstance(node, dict):
        if isinstance(node.get('type'), str):
            yield path, node
        for key, value in node.items():
            yield from _walk(value, f'{path}.{key}' if path else str(key))
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _walk(value, f'{path}.{i}')


_LOADED = {}


def load(name):
    if name not in _LOADED:
        _LOADED[name] = Config.fromfile(str(ROOT / 'configs' / name)).to_dict()
    return copy.deepcopy(_LOADED[name])


def _config_types():
    """{qualified name: (object, config, path)} of every type the configs name."""
    found = {}
    for config in CONFIGS:
        name = str(config.relative_to(ROOT / 'configs'))
        for path, node in _walk(load(name)):
            if path.startswith('vis_backends'):  # a helper variable; visualizer.* is checked
                continue
            obj = _registered(node['type'])
            found.setdefault(qualified_name(obj), (obj, name, path))
    return found


CONFIG_TYPES = _config_types()


def _reachable():
    """Every owner a config reaches: what configs name, our registered types, defaults."""
    owners = {key: obj for key, (obj, _, _) in CONFIG_TYPES.items()}
    for reg in REGISTRIES:
        for obj in reg.module_dict.values():
            if getattr(obj, '__module__', '').startswith(('methods', 'benchmark')):
                owners[qualified_name(obj)] = obj
    owners.update({qualified_name(o): o for o in map(_registered, DEFAULT_TYPES)})
    owners.update({qualified_name(o): o for o in FUNCTIONS})
    return owners


REACHABLE = _reachable()


def _params(owner):
    """The keys an owner takes: its signature's, or a section's table keys."""
    if isinstance(owner, str):
        return dict.fromkeys(FIELDS[owner]), False
    params, open_ended = parameters_of(owner)
    if inspect.isfunction(owner) and owner.__qualname__.count('.'):  # an unbound method
        params.pop(next(iter(params)))
    return params, open_ended


def test_reachable_owners_include_ours_and_the_configs():
    """The enumeration is not empty by accident: every model, hook and dataset is in it."""
    names = {key.rsplit('.', 1)[-1] for key in REACHABLE}
    assert {'MixCoMoCo', 'IMixMoCo', 'UnMixMoCo', 'MoCHiMoCo', 'SimCLR', 'MixCoSimCLR',
            'Supervised', 'LinearProbe', 'GPUViewPreprocessor', 'ResumableSampler',
            'SafeCheckpointHook', 'KNNMonitorHook', 'PreemptionHook', 'TinyImageNet', 'SGD',
            'CosineAnnealingLR', 'EpochBasedTrainLoop', 'LogProcessor', 'DataLoader'} <= names
    assert len(REACHABLE) >= 60


def test_every_parameter_has_a_rule_or_a_reason():
    failures = []
    for key in sorted(REACHABLE):
        owner = REACHABLE[key]
        params, open_ended = _params(owner)
        table = fields_of(owner)
        missing = [p for p in params if p not in table and '*' not in table]
        if missing:
            failures.append(f'{key}: no rule or reason for {missing} (add them to '
                            'benchmark/engine/config/fields.py FIELDS)')
        if open_ended and '**' not in table:
            failures.append(f'{key} takes **kwargs we cannot see: say where they go (Closed) '
                            'or check them')
    assert not failures, '\n'.join(failures)


def _resolve(key):
    """The object of a qualified name: the longest importable module, then attributes."""
    parts = key.split('.')
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module('.'.join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(key)


def test_no_stale_entry():
    """An entry names a parameter of its owner's own signature (or is an Extra key)."""
    failures = []
    for key in sorted(k for k in FIELDS if '.' in k):
        owner = _resolve(key)
        if qualified_name(owner) != key:
            failures.append(f'{key} resolves to {qualified_name(owner)}')
            continue
        init = owner.__dict__.get('__init__') if inspect.isclass(owner) else owner
        own = set(inspect.signature(init).parameters) if init else set()
        stale = [k for k, rule in FIELDS[key].items()
                 if k not in own and k not in ('*', '**') and not isinstance(rule, Extra)]
        if stale:
            failures.append(f'{key}: {stale} are no parameters of it')
    assert not failures, '\n'.join(failures)


def test_sections_hold_every_key_mmengine_reads():
    source = inspect.getsource(Runner)
    assert set(re.findall(r"env_cfg\.get\(\s*'(\w+)'", source)) <= set(FIELDS['env_cfg'])
    assert set(re.findall(r"auto_scale_lr(?:\.get\(|\[)\s*'(\w+)'", source)) == \
        set(FIELDS['auto_scale_lr'])
    read = set(re.findall(r"self\.cfg\.get\(\s*'(\w+)'", source))
    assert read <= set(FIELDS['config']) | set(parameters_of(Runner)[0])


def test_every_rule_documents_itself():
    """A reason is a sentence, not a placeholder."""
    for key, table in FIELDS.items():
        for name, rule in table.items():
            if isinstance(rule, Free):
                assert len(rule.why) >= 8, (key, name)


# --- generated out-of-range cases ------------------------------------------------------------

MOCO = 'mocov2_r18_tiny.py'
# Where an owner that no config names (or names without `type`) sits: (config, path, value
# put there first, or None to use what the config has).
OWNER_PLACES = {
    Runner: (MOCO, '', None), 'config': (MOCO, '', None), 'env_cfg': (MOCO, 'env_cfg', None),
    'auto_scale_lr': (MOCO, 'auto_scale_lr', None),
    set_multi_processing: (MOCO, 'env_cfg.mp_cfg', None),
    Runner.set_randomness: (MOCO, 'randomness', None), torch.compile: (MOCO, 'compile', {}),
    DataLoader: (MOCO, 'train_dataloader', None), build_resnet: (MOCO, 'model.backbone', None),
    MoCoV2Transform: (MOCO, 'train_dataloader.dataset.view', None),
    SimCLRTransform: ('simclr_r18_tiny.py', 'train_dataloader.dataset.view', None),
}
TYPE_PLACES = {  # registered names
    'LogProcessor': (MOCO, 'log_processor', None),
    'CheckpointHook': (MOCO, 'default_hooks.checkpoint', dict(type='CheckpointHook', interval=1)),
    'Adam': (MOCO, 'optim_wrapper.optimizer', dict(type='Adam', lr=1e-3)),
    'AdamW': (MOCO, 'optim_wrapper.optimizer', dict(type='AdamW', lr=1e-3)),
    'StepLR': (MOCO, 'param_scheduler.0', dict(type='StepLR', step_size=10)),
    'LinearLR': (MOCO, 'param_scheduler.0', dict(type='LinearLR')),
    'ConstantLR': (MOCO, 'param_scheduler.0', dict(type='ConstantLR')),
    'AmpOptimWrapper': (MOCO, 'optim_wrapper',
                        dict(type='AmpOptimWrapper', optimizer=dict(type='SGD', lr=0.1))),
    'IterBasedTrainLoop': (MOCO, 'train_cfg', dict(type='IterBasedTrainLoop', max_iters=10)),
    'TestLoop': (MOCO, 'test_cfg', dict(type='TestLoop')),
    'BaseDataPreprocessor': (MOCO, 'model.data_preprocessor', dict(type='BaseDataPreprocessor')),
    'MMDistributedDataParallel': (MOCO, 'model_wrapper_cfg',
                                  dict(type='MMDistributedDataParallel')),
    'ChannelsLastDistributedDataParallel': (MOCO, 'model_wrapper_cfg',
                                            dict(type='ChannelsLastDistributedDataParallel')),
    'WandbVisBackend': (MOCO, 'visualizer.vis_backends.1', dict(type='WandbVisBackend')),
    'RuntimeInfoHook': (MOCO, 'default_hooks.runtime_info', dict(type='RuntimeInfoHook')),
    'KillHook': (MOCO, 'custom_hooks.0', dict(type='KillHook')),
    'CompileHook': (MOCO, 'custom_hooks.0', dict(type='CompileHook')),
    'PoisonHook': (MOCO, 'custom_hooks.0', dict(type='PoisonHook', at_iter=3)),
    'pseudo_collate': (MOCO, 'train_dataloader.collate_fn', dict(type='pseudo_collate')),
    'ImageFolderDataset': (MOCO, 'train_dataloader.dataset',
                           dict(type='ImageFolderDataset', data_root='d', input_size=32,
                                view=dict(name='mocov2'))),
}
PLACES = {**{qualified_name(k): v for k, v in OWNER_PLACES.items()},
          **{qualified_name(_registered(k)): v for k, v in TYPE_PLACES.items()}}


def _place(key):
    if key in PLACES:
        return PLACES[key]
    if key in CONFIG_TYPES:
        return (*CONFIG_TYPES[key][1:], None)
    return None


def _put(tree, path, value):
    *parents, last = path.split('.')
    for part in parents:
        tree = tree[int(part)] if isinstance(tree, list) else tree[part]
    if isinstance(tree, list):
        tree[int(last)] = value
    else:
        tree[last] = value


def _cases():
    cases = []
    for key in sorted(REACHABLE):
        owner, place = REACHABLE[key], _place(key)
        table = fields_of(owner)
        for param, rule in table.items():
            if param in ('*', '**') or not getattr(rule, 'bad', ()):
                continue
            assert place is not None, f'{key}.{param} has bad values but no place in a config'
            cases += [(key, param, bad) for bad in rule.bad]
    return cases


CASES = _cases()


def test_enough_cases_are_generated():
    assert len(CASES) >= 600, len(CASES)


def _refusal(key, param, bad):
    """None if validate_config refuses ``bad`` for ``param`` of ``key`` with one line naming
    the key; else what happened."""
    config, path, value = _place(key)
    tree = load(config)
    if value is not None:
        _put(tree, path, copy.deepcopy(value))
    where = f'{path}.{param}' if path else param
    _put(tree, where, copy.deepcopy(bad))
    try:
        validate_config(Config(tree), world_size=1)
    except ConfigError as err:
        message = str(err)
        return None if '\n' not in message and where in message else f'message {message!r}'
    return 'accepted'


def test_out_of_range_values_are_one_line_naming_the_key():
    failures = [f'{key.rsplit(".", 1)[-1]}.{param}={bad!r} in {_place(key)[0]}: {why}'
                for key, param, bad in CASES for why in [_refusal(key, param, bad)] if why]
    assert not failures, f'{len(failures)} of {len(CASES)} bad values:\n' + '\n'.join(failures)


def test_a_value_in_range_is_not_counted_as_refused():
    """The walk above can fail: a legal value for a rule is reported as accepted."""
    assert _refusal('methods.moco.MoCo', 'temperature', 0.2) == 'accepted'
    assert _refusal('methods.moco.MoCo', 'temperature', 0) is None


def test_places_are_valid_before_the_bad_value():
    """Each placement validates as it is: the generated error comes from the bad value."""
    for key, (config, path, value) in sorted(PLACES.items()):
        tree = load(config)
        if value is not None:
            _put(tree, path, copy.deepcopy(value))
        validate_config(Config(tree), world_size=1)


def test_rule_kinds_are_what_the_table_says():
    assert isinstance(FIELDS['benchmark.data.sampler.ResumableSampler']['dataset'], Supplied)
    assert isinstance(FIELDS['methods.base.EncoderModel']['backbone'], Section)
    assert isinstance(FIELDS['mmengine.hooks.checkpoint_hook.CheckpointHook']['**'], Closed)
