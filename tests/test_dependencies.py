"""setup.cfg's dependencies: each import declared, one faiss, no GUI OpenCV, wandb optional;
the import caches the test workers would race to write are written first."""
import ast
import configparser
import importlib.metadata
import pickle
import re
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

# Distributions that install the module faiss: two of them in one environment overwrite each
# other's files.
FAISS_DISTRIBUTIONS = re.compile(r'^faiss(-cpu.*|-gpu.*|-cuda.*)?$')
GUI_OPENCV = {'opencv-python', 'opencv-contrib-python'}  # need libGL; the headless builds do not
# Installed in place of a declared distribution, with the same modules: the GPU faiss
# (make install-gpu), and full mmengine where an environment has it for other reasons.
STAND_INS = {'faiss-gpu-cu12': 'faiss-cpu', 'mmengine': 'mmengine-lite'}


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(ROOT / 'setup.cfg')
    return parser


def requirements(text: str) -> list:
    return [Requirement(line) for line in text.strip().splitlines()
            if line.strip() and not line.strip().startswith('#')]


def install_requires() -> list:
    return requirements(setup_cfg()['options']['install_requires'])


def extras() -> dict:
    section = setup_cfg()['options.extras_require']
    return {name: requirements(section[name]) for name in section}


def names(reqs) -> set:
    return {canonicalize_name(r.name) for r in reqs}


def imported_modules() -> set:
    """Top-level modules imported by the packages and the tools, stdlib and our own left out."""
    found = set()
    for folder in ('benchmark', 'methods', 'tools'):
        for path in (ROOT / folder).rglob('*.py'):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split('.')[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split('.')[0])
    return found - set(sys.stdlib_module_names) - {'benchmark', 'methods', 'tools', 'configs'}


def test_python_requires_310_in_both_places():
    cfg = setup_cfg()
    assert cfg['metadata']['python_requires'] == cfg['options']['python_requires'] == '>=3.10'


@pytest.mark.parametrize('extra', [None, *extras()])
def test_install_and_each_extra_have_exactly_one_faiss(extra):
    """faiss-gpu-cu12 on top of faiss-cpu would overwrite one faiss with the other: the GPU
    build replaces faiss-cpu (make install-gpu), no extra adds it."""
    reqs = install_requires() + (extras()[extra] if extra else [])
    assert sorted(n for n in names(reqs) if FAISS_DISTRIBUTIONS.match(n)) == ['faiss-cpu']


def test_wandb_is_an_extra_that_the_test_extra_includes():
    assert 'wandb' not in names(install_requires())
    assert 'wandb' in names(extras()['wandb']) and 'wandb' in names(extras()['test'])


def test_no_gui_opencv_mmengine_lite_with_headless_opencv():
    """mmengine requires opencv-python (GUI, libGL); mmengine-lite is the same package without
    it, and mmengine's runner imports cv2, which opencv-python-headless gives."""
    declared = names(install_requires())
    assert {'mmengine-lite', 'opencv-python-headless'} <= declared
    assert not declared & (GUI_OPENCV | {'mmengine'})
    lite = next(r for r in install_requires() if r.name == 'mmengine-lite')
    assert lite.specifier.contains('0.10.7') and not lite.specifier.contains('0.11.0')


def test_torch_range_has_no_upper_cap_and_admits_the_installed_release():
    reqs = {canonicalize_name(r.name): r for r in install_requires()}
    for name in ('torch', 'torchvision'):
        assert not any(s.operator in ('<', '<=', '==', '~=') for s in reqs[name].specifier)
        installed = importlib.metadata.version(name).split('+')[0]
        assert reqs[name].specifier.contains(installed), (name, installed)
    assert not reqs['torch'].specifier.contains('2.13.0')


def test_every_imported_package_is_declared():
    """A module the code imports comes from a distribution setup.cfg names (tqdm, for one)."""
    declared = names(install_requires()) | set().union(*map(names, extras().values()))
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(imported_modules()):
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        if not {STAND_INS.get(d, d) for d in dists} & declared:
            missing[module] = sorted(dists) or 'not installed'
    assert not missing, f'imported but not in setup.cfg: {missing}'


def test_import_faiss_and_one_faiss_distribution_installed():
    import faiss
    index = faiss.IndexFlatIP(4)
    assert index.ntotal == 0
    dists = sorted({canonicalize_name(d) for d in
                    importlib.metadata.packages_distributions().get('faiss', [])})
    assert len(dists) == 1 and FAISS_DISTRIBUTIONS.match(dists[0]), dists


def test_license_is_mit_as_setup_cfg_says():
    assert setup_cfg()['metadata']['license'] == 'MIT'
    assert (ROOT / 'LICENSE').read_text().startswith('MIT License\n')


def test_yapfs_grammar_cache_is_written_before_the_workers_start(tmp_path):
    """With an empty cache folder, the controller's pytest_configure leaves yapf's grammar
    pickles whole on disk, so that the workers only read them (google/yapf#1204)."""
    code = 'import tests.conftest as c; c.write_import_caches()'
    env = {'XDG_CACHE_HOME': str(tmp_path), 'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path)}
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    pickles = list(tmp_path.glob('YAPF/**/*.pickle'))
    assert len(pickles) == 2, pickles
    for path in pickles:  # whole: each loads as the grammar tables yapf reads
        with open(path, 'rb') as f:
            assert {'symbol2number', 'dfas', 'labels'} <= set(pickle.load(f)), path
