"""benchmark.components: importing it (and methods) registers every type any config names.

Each `type=` of every config under configs/ is looked up in the mmengine registry that builds
it. Suite-owned types must also be defined in a module that `benchmark.components` or
`methods` imports (found statically, so a type registered by some other test's import cannot
hide a module the components file forgot).
"""
import ast
import re

# mmengine's own types (its loops, hooks, optimizers, schedulers, samplers) are registered when
# mmengine.runner is imported, as tools/train.py does before it builds a config; without this
# import the loops a config names would be found only after another test imported the runner.
import mmengine.runner  # noqa: F401
import pytest
from mmengine.config import Config
from mmengine.registry import (DATA_SAMPLERS, DATASETS, FUNCTIONS, HOOKS, LOOPS, METRICS, MODELS,
                               OPTIM_WRAPPERS, OPTIMIZERS, PARAM_SCHEDULERS, VISBACKENDS,
                               VISUALIZERS)

import benchmark.components
from benchmark.layout import REPO_ROOT

# Where a config places a `type=` (list indices written []) -> the registry that builds it.
PLACES = [
    (r'model', MODELS),
    (r'model\.data_preprocessor', MODELS),
    (r'(train|val|test)_dataloader\.dataset', DATASETS),
    (r'(train|val|test)_dataloader\.sampler', DATA_SAMPLERS),
    (r'(train|val|test)_dataloader\.collate_fn', FUNCTIONS),
    (r'default_hooks\.\w+|custom_hooks\[\]', HOOKS),
    (r'(visualizer\.)?vis_backends\[\]', VISBACKENDS),
    (r'visualizer', VISUALIZERS),
    (r'(val|test)_evaluator(\[\])?', METRICS),
    (r'optim_wrapper', OPTIM_WRAPPERS),
    (r'optim_wrapper\.optimizer', OPTIMIZERS),
    (r'param_scheduler(\[\])?', PARAM_SCHEDULERS),
    (r'(train|val|test)_cfg', LOOPS),
]
CONFIGS = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / 'configs').rglob('*.py'))


def _types(node, path, out):
    """(place, type name) of every dict with a 'type' key inside a config."""
    if isinstance(node, dict):
        if 'type' in node:
            out.append((path, node['type']))
        for key, value in node.items():
            _types(value, f'{path}.{key}' if path else key, out)
    elif isinstance(node, (list, tuple)):
        for value in node:
            _types(value, f'{path}[]', out)
    return out


def _registry(place):
    found = [reg for pattern, reg in PLACES if re.fullmatch(pattern, place)]
    assert len(found) == 1, f'no registry known for a type at {place!r}; extend PLACES'
    return found[0]


def _module_file(name):
    base = REPO_ROOT.joinpath(*name.split('.'))
    for path in (base.with_suffix('.py'), base / '__init__.py'):
        if path.is_file():
            return path
    return None


def _static_closure(roots):
    """Project modules imported, directly or not, by `roots` (parents of each included)."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen.add(name)
        parts = name.split('.')
        todo += ['.'.join(parts[:i]) for i in range(1, len(parts))]
        is_pkg = path.name == '__init__.py'
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ''
                if node.level:
                    anchor = parts if is_pkg else parts[:-1]
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = '.'.join(anchor + ([node.module] if node.module else []))
                todo += [base] + [f'{base}.{a.name}' for a in node.names]
    return seen


REACHED = _static_closure(benchmark.components.IMPORTS)


def test_imports_name_what_configs_list():
    assert benchmark.components.IMPORTS == ['methods', 'benchmark.components']
    # the closure is real: it reaches the hooks, the datasets and the models
    assert {'benchmark.engine.preemption', 'benchmark.data.image_files', 'methods.mixco',
            'benchmark.evaluation.linear_probe'} <= REACHED
    assert 'benchmark.harness.faults.hooks' not in REACHED  # the campaign's hooks stay out


@pytest.mark.parametrize('config', CONFIGS)
def test_every_type_a_config_names_is_registered(config):
    cfg = Config.fromfile(str(REPO_ROOT / config))
    found = _types(cfg.to_dict(), '', [])
    for place, name in found:
        registry = _registry(place)
        obj = registry.get(name)
        assert obj is not None, f'{config}: {place}.type={name!r} is not in {registry.name}'
        module = getattr(obj, '__module__', '')
        if module.startswith(('methods', 'benchmark')):
            assert module in REACHED, f'{name} lives in {module}, which components does not import'


@pytest.mark.slow
def test_configs_name_the_suites_own_types():
    """The walk is not vacuous: the suite's hooks, models and datasets all appear."""
    names = {name for config in CONFIGS
             for _, name in _types(Config.fromfile(str(REPO_ROOT / config)).to_dict(), '', [])}
    assert {'SafeCheckpointHook', 'RunInfoHook', 'KNNMonitorHook', 'NaNGuardHook',
            'PreemptionHook', 'SafeWandbVisBackend', 'ResumableSampler', 'LinearAccuracy',
            'LinearProbe', 'MoCo', 'MixCoMoCo', 'SimCLR', 'MixCoSimCLR', 'Supervised',
            'TinyImageNet', 'Digits', 'CIFAR10', 'CIFAR100'} <= names


def test_unknown_place_is_reported():
    with pytest.raises(AssertionError, match='no registry known'):
        _registry('model.head')
