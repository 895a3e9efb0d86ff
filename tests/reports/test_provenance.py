"""benchmark.reports.provenance: versions, the checkout's git state (in a scratch repo), host."""
import hashlib
import importlib.metadata
import os
import platform
import subprocess

import pytest
import torch

from benchmark.reports import provenance
from benchmark.reports.provenance import (PACKAGES, cpu_model, git_state, host_info,
                                          package_versions)


def test_package_versions():
    versions = package_versions()
    assert set(versions) == set(PACKAGES) == {'python', 'torch', 'torchvision', 'mmengine',
                                             'lightly', 'faiss', 'sklearn', 'numpy'}
    assert versions['python'] == platform.python_version()
    assert versions['torch'] == importlib.metadata.version('torch')
    assert versions['torch'].split('+')[0] == torch.__version__.split('+')[0]
    assert versions['mmengine'] == '0.10.7'
    assert versions['faiss'] is not None  # one of its distribution names is installed
    assert versions['sklearn'] == importlib.metadata.version('scikit-learn')


def _git(repo, *args):
    return subprocess.run(['git', '-c', 'user.name=t', '-c', 'user.email=t@t', *args], cwd=repo,
                          check=True, capture_output=True).stdout


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A scratch git checkout with one commit; provenance looks at it instead of the suite's."""
    for key in ('GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE'):
        monkeypatch.delenv(key, raising=False)
    _git(tmp_path, 'init', '-q')
    (tmp_path / 'a.py').write_text('x = 1\n')
    _git(tmp_path, 'add', 'a.py')
    _git(tmp_path, 'commit', '-q', '-m', 'one')
    monkeypatch.setattr(provenance, 'ROOT', tmp_path)
    return tmp_path


def test_clean_checkout(repo):
    state = git_state()
    assert state == {'commit': _git(repo, 'rev-parse', 'HEAD').decode().strip(), 'dirty': False,
                     'diff_sha256': hashlib.sha256(b'').hexdigest()}
    assert len(state['commit']) == 40


def test_dirty_checkout_hashes_the_diff_and_the_new_files(repo):
    (repo / 'a.py').write_text('x = 2\n')
    (repo / 'new.py').write_text('y = 3\n')
    diff = _git(repo, 'diff', 'HEAD', '--binary')
    expected = hashlib.sha256(diff + b'\0new.py\0' + b'y = 3\n').hexdigest()
    state = git_state()
    assert state['dirty'] is True and state['diff_sha256'] == expected
    (repo / 'new.py').write_text('y = 4\n')  # the same diff, another new file: another hash
    assert git_state()['diff_sha256'] != expected


def test_outside_git_everything_is_none(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, 'ROOT', tmp_path)
    monkeypatch.setenv('GIT_CEILING_DIRECTORIES', str(tmp_path.parent))
    assert git_state() == {'commit': None, 'dirty': None, 'diff_sha256': None}


def test_host_info():
    info = host_info()
    assert info['node'] == platform.node()
    expected = (f'cuda:{torch.cuda.get_device_name(torch.cuda.current_device())}'
                if torch.cuda.is_available() else 'cpu')
    assert info['device'] == expected
    assert isinstance(info['cpu'], str) and info['cpu']
    assert isinstance(info['cpu_cores'], int) and info['cpu_cores'] >= 1
    assert info['machine_cores'] == os.cpu_count()


def test_host_info_counts_the_cores_of_the_affinity_and_of_the_machine():
    """A run pinned to one core (a suite's slot) records 1 core of the machine's."""
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mine)})
    try:
        info = host_info()
    finally:
        os.sched_setaffinity(0, mine)
    assert (info['cpu_cores'], info['machine_cores']) == (1, os.cpu_count())


def test_a_cpu_named_without_a_number_gets_its_family_and_vector_unit():
    hidden = ('processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n'
              'model name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512f\n')
    assert cpu_model(hidden) == 'AMD EPYC (family 26, model 2, AVX-512)'
    older = hidden.replace(': 26', ': 25').replace(' avx512f', '')
    assert cpu_model(older) == 'AMD EPYC (family 25, model 2, AVX2)'
    named = 'cpu family\t: 6\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\n'
    assert cpu_model(named) == 'Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz'
