"""Shared fixtures: the repo root, a free TCP port, a small fake Tiny-ImageNet, a tool's
``main`` called in-process as its command line calls it, and the method a config is for."""
import importlib.util
import logging
import os
import socket
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmark.layout import import_path  # noqa: E402
from benchmark.names import DATA_NAMES, LINEAR_CONFIG_SUFFIX  # noqa: E402

# Tests of the wandb integration itself; a machine without wandb (a GPU image) skips them, and
# the suite runs there with the wandb backends dropped (benchmark/engine/tracking.py).
needs_wandb = pytest.mark.skipif(importlib.util.find_spec('wandb') is None,
                                 reason='wandb is not installed')


E2E = ROOT / 'tests' / 'e2e'
# The data part of a config's name: a dataset of benchmark/names.py DATASETS by its record name
# or by the suffix of its configs ('tiny' for tiny-imagenet).
CONFIG_DATA = sorted({*DATA_NAMES.values(), *LINEAR_CONFIG_SUFFIX.values()})


def write_import_caches() -> None:
    """Write what a first import caches on disk, once, before processes import it side by side:
    yapf (which mmengine's Config imports) writes its grammar pickles at its first import, and
    a process importing it meanwhile reads a half-written file and fails with EOFError
    (google/yapf#1204). The controller calls this before pytest-xdist starts its workers."""
    import yapf  # noqa: F401


THREAD_VARIABLES = ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS')


def pytest_configure(config):
    """Under pytest-xdist, each worker's torch takes its share of the cores (two workers with
    torch's default of a thread per core would run twice as many threads as cores); the
    controller first writes the import caches the workers would race to write, and gives the
    workers, and every process a test starts, that share as their OpenMP and BLAS threads
    (where the caller set none): numpy, scikit-learn, faiss and a tool a test runs would
    otherwise each start a thread per core, which spin waiting for a core the other workers
    hold."""
    numprocesses = getattr(config.option, 'numprocesses', None)
    if 'PYTEST_XDIST_WORKER' not in os.environ:
        write_import_caches()
        if isinstance(numprocesses, int) and numprocesses > 1:
            share = str(max(1, (os.cpu_count() or 1) // numprocesses))
            for name in THREAD_VARIABLES:
                os.environ.setdefault(name, share)
    workers = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', 0))
    if workers > 1:
        import torch
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


SIGNALS_KEPT = ('SIGTERM', 'SIGINT', 'SIGUSR1', 'SIGUSR2', 'SIGCHLD')


@pytest.fixture(autouse=True)
def _signals_as_they_were():
    """Each test leaves the process's signal handlers and mask as it found them: a hook that
    installs its handler (PreemptionHook, held signals) must not change how a later test in
    the same worker behaves."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = [getattr(signal, n) for n in SIGNALS_KEPT if hasattr(signal, n)]
    handlers = {sig: signal.getsignal(sig) for sig in names}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@pytest.fixture(autouse=True)
def _stops_end_only_the_tests_children(monkeypatch):
    """A stop run in-process (a tool's Ctrl-C, PreemptionHook's exit) ends the children the
    test started, not the ones the worker had before it (a session's Chromium, another test's
    loader workers): the stop's own code ends every child of its process."""
    import multiprocessing

    from benchmark import stop
    children, active = stop.child_pids, multiprocessing.active_children
    before = set(children())
    monkeypatch.setattr(stop, 'child_pids', lambda: [p for p in children() if p not in before])
    monkeypatch.setattr(multiprocessing, 'active_children',
                        lambda: [w for w in active() if w.pid not in before])
    yield


@pytest.fixture(autouse=True)
def _no_wandb_session_left():
    """Each test ends the wandb session it started: an in-process training starts one (even
    with wandb disabled) that keeps the environment it saw, and wandb then warns on stderr in a
    later test of the same worker whose environment differs (a test expecting one error line
    fails, depending on the order)."""
    yield
    setup = sys.modules.get('wandb.sdk.wandb_setup')
    if setup is not None and getattr(setup, '_singleton', None) is not None:
        import wandb
        wandb.teardown()


def pytest_collection_modifyitems(config, items):
    """Every test under tests/e2e/ is `slow` (`make test-fast` leaves them out), as are the
    tests of the gloo process pair (tests/methods/conftest.py) and the tests elsewhere marked
    so (seconds each: real processes, whole runs); they run first.
    Tests marked `cuda` run where a CUDA device is, and are skipped (saying why) elsewhere."""
    import torch
    for item in items:
        if item.path.resolve().is_relative_to(E2E) or 'two_process_results' in getattr(
                item, 'fixturenames', ()):
            item.add_marker(pytest.mark.slow)
    # The slow ones first: pytest-xdist's workers then end on short tests, together. The sort is
    # stable, so it keeps the random order pytest-randomly gave each group: randomly shuffles in a
    # hook wrapper, before every plain hook such as this one. This hook must stay plain (not
    # trylast): pytest's `-m` selection is a plain hook that runs after it and needs the `slow`
    # markers added above, or `-m 'not slow'` would keep tests/e2e/.
    items.sort(key=lambda item: item.get_closest_marker('slow') is None)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason='needs a CUDA device')
    for item in items:
        if item.get_closest_marker('cuda'):
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001
    """A test that leaves signals blocked in this process would change what every later test
    on the same worker sees (its children inherit the mask; a stop signal waits unseen): the
    mask is put back after each test, with a warning naming the test."""
    import signal
    import warnings
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    after = signal.pthread_sigmask(signal.SIG_SETMASK, before)
    if after != before:
        warnings.warn(f'{item.nodeid} left the signal mask {sorted(map(int, after))} '
                      f'(was {sorted(map(int, before))}); put back')


LAST_RUN = ROOT / 'results' / 'tests' / 'last_run.md'  # the whole suite's last run, cited by README
OUTCOMES = ('passed', 'failed', 'skipped', 'error')


STARTED = pytest.StashKey[float]()


def pytest_sessionstart(session):
    session.config.stash[STARTED] = time.monotonic()


def last_run_text(counts: dict, seconds: float, workers: int, cores: int, cpu: str,
                  commit: Optional[str], when: str) -> str:
    """The record of a run of the whole suite: its counts, time, workers and CPU."""
    minutes, rest = divmod(round(seconds), 60)
    row = ' | '.join(f'{counts.get(k, 0):,}' for k in OUTCOMES)
    return ('# The tests\' last run\n\n'
            f'`make test` (the whole suite in {workers or 1} process(es)) on {when}, at '
            f"commit {(commit or 'unknown')[:12]}, on {cores} core(s) of {cpu}; "
            'written by the run itself (tests/conftest.py).\n\n'
            f"| {' | '.join(OUTCOMES)} | time |\n|{'---|' * (len(OUTCOMES) + 1)}\n"
            f'| {row} | {minutes} min {rest} s |\n')


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """A passing run of the whole suite (no path, -k, -m, --lf, --sw, -x, --deselect, --ignore,
    --co, --fixtures or --setup-plan) records itself in LAST_RUN."""
    option = config.option
    partial = ('keyword', 'markexpr', 'lf', 'stepwise', 'maxfail', 'deselect', 'ignore',
               'ignore_glob', 'collectonly', 'showfixtures', 'setupplan', 'setuponly')
    counts = {k: len(terminalreporter.stats.get(k, [])) for k in OUTCOMES}
    if config.args_source is not pytest.Config.ArgsSource.TESTPATHS or exitstatus != 0 or any(
            getattr(option, name, None) for name in partial) or not counts['passed'] or (
            'PYTEST_XDIST_WORKER' in os.environ or STARTED not in config.stash):
        return
    from benchmark.reports.provenance import cpu_model, git_state
    text = last_run_text(counts, time.monotonic() - config.stash[STARTED],
                         getattr(option, 'numprocesses', 0) or 0, os.cpu_count() or 1,
                         cpu_model(), git_state()['commit'],
                         time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()))
    try:
        LAST_RUN.parent.mkdir(parents=True, exist_ok=True)
        LAST_RUN.write_text(text)
    except OSError as err:  # a read-only checkout: the run passed all the same
        terminalreporter.write_line(f'this run is not recorded: {err}')
        return
    terminalreporter.write_line(f'this run: {LAST_RUN.relative_to(ROOT)}')


REQUIRE_SLURM = 'REQUIRE_SLURM'  # =1 (CI): a `slurm` test without a reachable SLURM fails


SLURM_CONF_LINUXPROC = 'SLURM_CONF_LINUXPROC'  # a second cluster's slurm.conf: linuxproc tracking
SLURM_CONF_TWO_NODES = 'SLURM_CONF_TWO_NODES'  # a third cluster's slurm.conf: two slurmd


def slurm_unreachable(conf: Optional[str] = None) -> Optional[str]:
    """Why no SLURM answers here (None if one does): `sinfo` through `conf`, SLURM_CONF or the
    default config must list a node of the partition `debug`."""
    import shutil
    import subprocess
    if shutil.which('sinfo') is None:
        return 'sinfo is not installed'
    env = dict(os.environ, SLURM_CONF=conf) if conf else None
    try:
        proc = subprocess.run(['sinfo', '-h', '-p', 'debug', '-o', '%T'], capture_output=True,
                              text=True, timeout=20, env=env)
    except subprocess.TimeoutExpired:
        return 'sinfo did not answer within 20 s'
    if proc.returncode != 0 or not proc.stdout.split():
        lines = (proc.stderr or proc.stdout or 'no partition debug').strip().splitlines()
        last = lines[-1] if lines else 'no partition debug'
        return last if last.startswith('sinfo:') else f'sinfo: {last}'
    return None


def no_slurm(line: str) -> None:
    """Skip with `line`, or fail where REQUIRE_SLURM=1 (CI)."""
    if os.environ.get(REQUIRE_SLURM) == '1':
        pytest.fail(f'{line} ({REQUIRE_SLURM}=1)', pytrace=False)
    pytest.skip(line)


@pytest.fixture(scope='session')
def real_slurm() -> None:
    """A SLURM that answers here (tools/slurm_cluster.sh up; SLURM_CONF exported), else the
    test is skipped with one line saying why, or fails where REQUIRE_SLURM=1 (CI)."""
    why = slurm_unreachable()
    if why is not None:
        no_slurm(f'no SLURM reachable ({why}); start one as root with tools/slurm_cluster.sh up '
                 f'and export SLURM_CONF as it says')


@pytest.fixture
def real_slurm_linuxproc(monkeypatch) -> None:
    """A second SLURM, with proctrack/linuxproc, whose slurm.conf SLURM_CONF_LINUXPROC names
    (exported as SLURM_CONF for the test), else skipped or failed as `real_slurm`."""
    conf = os.environ.get(SLURM_CONF_LINUXPROC)
    why = slurm_unreachable(conf) if conf else f'{SLURM_CONF_LINUXPROC} is not set'
    if why is not None:
        no_slurm(f'no SLURM with linuxproc tracking reachable ({why}); start one as root with '
                 'SLURM_CLUSTER_DIR=DIR SLURM_CLUSTER_PORT=6927 SLURM_CLUSTER_NODE=lp '
                 f'tools/slurm_cluster.sh up linuxproc and export {SLURM_CONF_LINUXPROC}='
                 'DIR/slurm.conf')
    monkeypatch.setenv('SLURM_CONF', conf)


@pytest.fixture
def real_slurm_two_nodes(monkeypatch) -> None:
    """A SLURM of two nodes (two slurmd on this machine), whose slurm.conf SLURM_CONF_TWO_NODES
    names (exported as SLURM_CONF for the test), else skipped or failed as `real_slurm`."""
    import subprocess
    conf = os.environ.get(SLURM_CONF_TWO_NODES)
    why = slurm_unreachable(conf) if conf else f'{SLURM_CONF_TWO_NODES} is not set'
    if why is None:
        nodes = subprocess.run(['sinfo', '-h', '-N', '-p', 'debug', '-o', '%N'], text=True,
                               capture_output=True, timeout=20,
                               env=dict(os.environ, SLURM_CONF=conf)).stdout.split()
        why = None if len(set(nodes)) >= 2 else f'its partition debug has nodes {nodes}'
    if why is not None:
        no_slurm(f'no SLURM of two nodes reachable ({why}); start one as root with '
                 'SLURM_CLUSTER_DIR=DIR SLURM_CLUSTER_PORT=6937 SLURM_CLUSTER_NODE=node '
                 f'tools/slurm_cluster.sh up cgroup 2 and export {SLURM_CONF_TWO_NODES}='
                 'DIR/slurm.conf')
    monkeypatch.setenv('SLURM_CONF', conf)


REQUIRE_CHROMIUM = 'REQUIRE_CHROMIUM'  # =1 (CI): a browser test without Chromium fails


@pytest.fixture(scope='session')
def chromium() -> str:
    """The path of a Chromium (Debian's package: apt-get install chromium), else the test is
    skipped with one line saying so, or fails where REQUIRE_CHROMIUM=1 (CI)."""
    from tests.reports.browser import find_chromium
    path = find_chromium()
    if path is None:
        line = 'no Chromium installed (apt-get install chromium) for the browser tests'
        if os.environ.get(REQUIRE_CHROMIUM) == '1':
            pytest.fail(f'{line} ({REQUIRE_CHROMIUM}=1)', pytrace=False)
        pytest.skip(line)
    return path


@pytest.fixture(scope='session')
def browser(chromium, tmp_path_factory):
    """One headless Chromium (tests/reports/browser.py) shared by the browser tests; each
    test starts with no console message kept (``browser.problems``)."""
    from tests.reports.browser import Browser
    session = Browser(chromium, tmp_path_factory.mktemp('chromium-profile'))
    yield session
    session.close()


@pytest.fixture
def page_browser(browser):
    """The shared browser with its console messages cleared for this test."""
    browser.problems.clear()
    return browser


@pytest.fixture
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@pytest.fixture(scope='session')
def fake_tiny(tmp_path_factory) -> str:
    from benchmark.data.fakes import make_fake_tiny_imagenet
    return str(make_fake_tiny_imagenet(tmp_path_factory.mktemp('data'),
                                       num_classes=4, train_per_class=8, val_per_class=2))


def call_tool(tool: ModuleType, argv: list) -> int:
    """What ``python tools/<name>.py ARGV`` does: train.py calls its main itself (an error during
    training keeps its traceback), every other tool goes through `run_tool`; argparse's exit
    (SystemExit) is returned as the exit code."""
    from benchmark.cli import run_tool
    try:
        if tool.__name__ == 'tools.train':
            return tool.main(argv)
        return run_tool(tool.main, argv)
    except SystemExit as stop:
        return stop.code


@pytest.fixture
def run_main(capsys, monkeypatch):
    """``run_main(tool, *args)`` -> (exit code, stdout, stderr, seconds) of a tool module
    (``from tools import train``) run in-process from the repository root with wandb off, as
    the subprocess checks run the tools."""
    from mmengine.logging import MMLogger

    from benchmark.engine.compat import manager_instances
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    monkeypatch.delenv('WANDB_API_KEY', raising=False)
    capsys.readouterr()
    loggers = set(manager_instances(MMLogger))

    def run(tool: ModuleType, *args) -> tuple:
        start = time.monotonic()
        code = call_tool(tool, [str(a) for a in args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err, time.monotonic() - start
    yield run
    # A Runner built in the call logs to the stdout this test captured, closed after it: its
    # console handlers go, so that a later test's log lines do not hit a closed stream.
    instances = manager_instances(MMLogger)
    for name in set(instances) - loggers:
        logger = instances[name]
        for handler in [h for h in logger.handlers if type(h) is logging.StreamHandler]:
            logger.removeHandler(handler)


def tiny_backbone(depth: int = 18, small_stem: bool = False,  # noqa: ARG001  build_resnet's
                  width: float = 1.0):
    """Conv, batch norm (running statistics travel in checkpoints), 8 pooled features: stands
    in for the ResNet where a test needs real training steps, not the ResNet's numbers."""
    from torch import nn
    net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8),
                        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    net.feature_dim = 8
    return net


@pytest.fixture
def tiny_backbones(monkeypatch):
    """Every method built in this test gets `tiny_backbone` instead of a ResNet."""
    import methods.base
    monkeypatch.setattr(methods.base, 'build_resnet', tiny_backbone)


@pytest.fixture
def subprocess_env() -> dict:
    env = dict(os.environ, PYTHONPATH=import_path(), OMP_NUM_THREADS='1', PYTHONWARNINGS='ignore',
               WANDB_MODE='disabled')
    env.pop('WANDB_API_KEY', None)
    return env


class _RunsCode:
    """Pickles as a call of os.system: what a malicious checkpoint holds (never called here)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f'touch {self.marker}',)


@pytest.fixture
def bad_checkpoints(tmp_path) -> dict:
    """{kind: path} of checkpoints that must be refused: truncated, empty, text, a pickle that
    asks for os.system (creating ``marker`` if it ever ran), a foreign plain pickle, a folder;
    ``marker`` is the file that must never appear."""
    import pickle

    import torch
    good = tmp_path / 'good.pth'
    torch.save({'state_dict': {'backbone.conv1.weight': torch.zeros(64, 3, 7, 7)}, 'meta': {}},
               good)
    data = good.read_bytes()
    marker = tmp_path / 'CODE_RAN'
    paths = dict(truncated=tmp_path / 'truncated.pth', empty=tmp_path / 'empty.pth',
                 text=tmp_path / 'notes.pth', forbidden=tmp_path / 'evil.pth',
                 plain_pickle=tmp_path / 'plain.pkl', folder=tmp_path / 'a_folder.pth')
    paths['truncated'].write_bytes(data[:len(data) // 2])
    paths['empty'].write_bytes(b'')
    paths['text'].write_text('these are my notes, not weights\n')
    torch.save({'state_dict': {}, 'meta': _RunsCode(str(marker))}, paths['forbidden'])
    paths['plain_pickle'].write_bytes(pickle.dumps({'weights': [1.0, 2.0]}, protocol=4))
    paths['folder'].mkdir()
    return dict({k: str(v) for k, v in paths.items()}, marker=str(marker))
