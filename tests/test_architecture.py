"""The floor plan holds: imports run one way, no circles, no private names across modules, small
files, a sentence in every package's __init__, configs name only the registration module, every
module has a test that imports it (docs/design.md, "Architecture")."""
import ast

import pytest
from mmengine.config import Config

from benchmark.layout import REPO_ROOT

PACKAGES = ('methods', 'benchmark', 'tools')
# Layer of each benchmark subpackage; a module may import its own layer and the ones below.
# suites and harness share a layer and never import each other (like data and reports).
LAYERS = {'suites': 4, 'harness': 4, 'evaluation': 3, 'engine': 2, 'data': 1, 'reports': 1}
SIDE_BY_SIDE = [{'data', 'reports'}, {'suites', 'harness'}]
FOUNDATION = {'names', 'layout', 'dist', 'atomic_io', 'cli', 'components', 'exit_codes', 'stop'}
FACES = {'knn', 'cluster'}  # contract re-exports (docs/design.md "Public contracts")


def _modules():
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO_ROOT / pkg).rglob('*.py')):
            parts = list(path.relative_to(REPO_ROOT).with_suffix('').parts)
            if parts[-1] == '__init__':
                parts = parts[:-1]
            out['.'.join(parts)] = path
    return out


MODULES = _modules()


def _imports(name, path):
    """Project modules imported by `name` (relative imports resolved)."""
    found = set()
    is_pkg = path.name == '__init__.py'
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = name.split('.') if is_pkg else name.split('.')[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                base = '.'.join(anchor + ([node.module] if node.module else []))
            names = [base] + [f'{base}.{a.name}' for a in node.names]
        for full in names:
            while full and full not in MODULES:
                full = full.rpartition('.')[0]
            if full and full != name:
                found.add(full)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module):
    parts = module.split('.')
    if parts[0] == 'methods':
        return 0
    if parts[0] == 'tools':
        return 9
    if len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS[parts[1]]
    return 0  # foundation, faces, components (checked apart)


def test_no_import_circles():
    state, cycle = {}, []

    def visit(node, stack):
        state[node] = 'open'
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 'open':
                cycle.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 'done'
    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert not cycle, f'import circles: {cycle}'


def test_methods_import_nothing_from_benchmark():
    bad = {m: sorted(i for i in deps if i.startswith('benchmark'))
           for m, deps in GRAPH.items() if m.startswith('methods')}
    assert not {m: d for m, d in bad.items() if d}


@pytest.mark.parametrize('module', sorted(m for m in MODULES if m.startswith('benchmark')))
def test_imports_run_one_way(module):
    """tools -> suites | harness -> evaluation -> engine -> data | reports -> foundation | methods."""
    if module in ('benchmark.components',) or module.split('.')[-1] in FACES:
        return  # the registration module and the faces sit on top by design
    own = _layer(module)
    for dep in GRAPH[module]:
        if dep.startswith('tools'):
            pytest.fail(f'{module} imports the tool {dep}')
        if dep == 'benchmark.components' or dep.split('.')[-1] in FACES and dep.count('.') == 1:
            pytest.fail(f'{module} imports {dep}, which only configs and tools use')
        same = dep.split('.')[:2] == module.split('.')[:2]
        pair = {module.split('.')[1], dep.split('.')[1]} if dep.count('.') else set()
        if not same and pair in SIDE_BY_SIDE:
            pytest.fail(f'{module} imports {dep}: {" and ".join(sorted(pair))} do not import each other')
        assert dep == 'benchmark' or same or _layer(dep) < own or dep.split('.')[1] in FOUNDATION, \
            f'{module} (layer {own}) imports {dep} (layer {_layer(dep)}): imports run one way'


def test_foundation_imports_only_foundation_and_methods():
    for name in FOUNDATION - {'components'}:
        deps = GRAPH[f'benchmark.{name}']
        assert all(d.startswith('methods') or d == 'benchmark' or d.split('.')[1] in FOUNDATION
                   for d in deps), deps


def test_benchmark_top_level_holds_foundation_faces_and_subpackages():
    top = {p.stem for p in (REPO_ROOT / 'benchmark').glob('*.py')} - {'__init__'}
    assert top <= FOUNDATION | FACES, sorted(top - FOUNDATION - FACES)
    subpackages = {p.name for p in (REPO_ROOT / 'benchmark').iterdir()
                   if p.is_dir() and (p / '__init__.py').exists()}
    assert subpackages == set(LAYERS)


def test_no_python_file_over_400_lines():
    long = {str(p.relative_to(REPO_ROOT)): n for p in MODULES.values()
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long


def test_tools_hold_no_library_steps():
    for path in (REPO_ROOT / 'tools').glob('*.py'):
        assert len(path.read_text().splitlines()) <= 150, path.name


@pytest.mark.parametrize('config', sorted(str(p.relative_to(REPO_ROOT))
                                          for p in (REPO_ROOT / 'configs').rglob('*.py')))
def test_configs_import_only_methods_and_components(config):
    imports = Config.fromfile(str(REPO_ROOT / config)).get('custom_imports', {}).get('imports', [])
    assert set(imports) <= {'methods', 'benchmark.components'}


def _imported_by_tests():
    seen = set()
    for path in (REPO_ROOT / 'tests').rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                seen.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                seen.add(node.module)
                seen.update(f'{node.module}.{a.name}' for a in node.names)
    return seen


def test_every_module_has_a_test_that_imports_it():
    seen = _imported_by_tests()
    empty_packages = {m for m, p in MODULES.items()  # a docstring at most: nothing to test
                      if p.name == '__init__.py' and not ast.parse(p.read_text()).body[
                          1 if ast.get_docstring(ast.parse(p.read_text())) else 0:]}
    untested = sorted(m for m in MODULES if m.startswith(('methods', 'benchmark'))
                      and m not in seen and m not in empty_packages)
    assert not untested


def test_tests_mirror_the_packages():
    for sub in ('methods', 'data', 'evaluation', 'reports', 'engine', 'engine/config', 'suites',
                'harness/speed', 'harness/faults', 'e2e'):
        assert (REPO_ROOT / 'tests' / sub).is_dir(), sub
    assert not [p.name for p in (REPO_ROOT / 'tests').glob('test_*.py')
                if p.stem.replace('test_', '') not in FOUNDATION | FACES | {'configs', 'architecture', 'readme',
                                                                         'dependencies'}]


def test_no_test_loads_a_tool_by_file_path():
    for path in (REPO_ROOT / 'tests').rglob('*.py'):
        assert 'spec_from_file_location' not in path.read_text() or path.name == 'test_architecture.py', path


def _private_imports(path):
    """(module, name) of every `from X import _name` of a project module in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or '').split('.')[0]
                                                 in PACKAGES):
            found += [(node.module, a.name) for a in node.names
                      if a.name.startswith('_') and not a.name.startswith('__')]
    return found


def test_no_module_imports_another_modules_private_name():
    paths = list(MODULES.values()) + sorted((REPO_ROOT / 'tests').rglob('*.py'))
    bad = {str(p.relative_to(REPO_ROOT)): found for p in paths if (found := _private_imports(p))}
    assert not bad, f'private names imported across modules (make them public): {bad}'


def test_private_import_check_catches_one(tmp_path):
    sample = tmp_path / 'sample.py'
    sample.write_text('from benchmark.data.base import _hidden, visible\n')
    assert _private_imports(sample) == [('benchmark.data.base', '_hidden')]


def test_every_package_init_says_what_the_room_holds():
    inits = [p for p in MODULES.values() if p.name == '__init__.py']
    assert len(inits) >= 11
    silent = [str(p.relative_to(REPO_ROOT)) for p in inits
              if len((ast.get_docstring(ast.parse(p.read_text())) or '').split()) < 5]
    assert not silent, f'packages whose __init__.py has no sentence: {silent}'


def test_harness_holds_no_suites_and_config_rules_live_in_engine_config():
    harness = {m for m in MODULES if m.startswith('benchmark.harness')}
    assert not [m for m in harness if 'suite' in m]
    assert {'benchmark.suites.spec', 'benchmark.suites.plan', 'benchmark.suites.runner',
            'benchmark.suites.report'} <= set(MODULES)
    data_deps = {d for m, deps in GRAPH.items() if m.startswith('benchmark.data') for d in deps}
    assert not [d for d in data_deps if d.startswith('benchmark.engine')]


def test_training_time_hooks_do_not_import_the_after_training_evaluation():
    for hook in ('benchmark.evaluation.knn_monitor', 'benchmark.evaluation.online_probe'):
        seen, todo = set(), [hook]
        while todo:  # everything the hook imports, transitively, inside the project
            for dep in GRAPH[todo.pop()] - seen:
                seen.add(dep)
                todo.append(dep)
        assert 'benchmark.evaluation.evaluate' not in seen, hook
