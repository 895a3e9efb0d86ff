"""What the end-to-end tests share, trained once per session.

ONE uninterrupted run of the tiny MixCo config (`tiny_config` over `tiny_data`) per process
count: `reference_1p` through tools/train.py, `reference_2p` through tools/dist_train.sh with
two gloo processes. Every test that kills, signals or fills the disk of a run of that config
compares its resumed weights with the reference of its process count (a one-process run is
the same through tools/train.py and through tools/dist_train.sh: one thread, one rank). The
references also carry their own claims (each evaluated, with wandb offline; tests/e2e/test_train.py
and tests/e2e/test_train_tool_runs.py check them), so no other test trains them again.

And the two-run digits suite run one run at a time, killed in its second run and restarted by
two suite processes at once (`digits_suite`): tests/e2e/test_suite_e2e.py checks the restart,
tests/e2e/test_suite_parallel_e2e.py compares the same suite run two at a time with it, and
tests/e2e/test_export_plain_process.py exports its MoCo-v2 run (writing nothing into it).

Each is made once per session even under pytest-xdist (`once`): the first worker that needs it
trains it, a second waits for it."""
import dataclasses
import importlib.util
import os
import pickle
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Callable, Optional, Sequence, TypeVar

import pytest
from filelock import FileLock

from benchmark.data.fakes import make_fake_tiny_imagenet
from benchmark.harness.faults import runs as fr
from benchmark.layout import REPO_ROOT

EPOCHS = 2
STEPS = {1: 8, 2: 4}  # iterations per epoch: 32 images, a batch of 4 per process
INTERVAL = 3  # iter_<n>.pth every 3 iterations (besides every epoch's)
# `fr.write_config`'s settings besides these: ResNet-18 at a quarter width (its layers, a
# sixteenth of the weights: these runs test the pipeline, and checkpoints of 8 MB save in moments)
TINY = dict(workers=1, iter_interval=INTERVAL, width=0.25)


T = TypeVar('T')


def once(tmp_path_factory, name: str, make: Callable[[Path], T]) -> T:
    """`make(folder)` once per test session: under pytest-xdist (make test runs three workers)
    the first worker to ask makes it under a lock in the session's shared temporary folder,
    the others wait for it and read its pickled result."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get('PYTEST_XDIST_WORKER'):
        root = root.parent  # the workers' folders are popen-gw<n> in the session's
    folder, result = root / name, root / f'{name}.pickle'
    with FileLock(str(root / f'{name}.lock')):
        if result.exists():
            kind, fields = pickle.loads(result.read_bytes())
            return fields if kind is None else globals()[kind](**fields)
        folder.mkdir(exist_ok=True)
        value = make(folder)
        # A dataclass of this module goes by its fields: pickle finds a class by its module's
        # name, and pytest may import this file under a name that is not importable.
        if dataclasses.is_dataclass(value):
            saved = (type(value).__name__,
                     {f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
        else:
            saved = (None, value)
        result.write_bytes(pickle.dumps(saved))
        return value


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory) -> str:
    """32 training images of 32 px in 2 classes, 2 validation images per class."""
    return once(tmp_path_factory, 'tiny-data', lambda folder: str(make_fake_tiny_imagenet(
        folder, num_classes=2, train_per_class=16, val_per_class=2, size=32)))


def tiny_config(path, data: str, *, imports: Sequence[str] = (), hooks: Sequence[str] = ()) -> str:
    """The tiny MixCo config every shared reference trains (`fr.write_config`: batch 4, queue
    16, 32 px, ResNet-18 at width 0.25, one loader worker, 2 epochs, iter_<n>.pth every 3
    iterations), written to `path`;
    a test's fault adds modules to import (on the run's PYTHONPATH) and hooks, which change
    when a run stops, never its weights."""
    extra = (f'custom_imports = dict(imports={fr.IMPORTS + list(imports)!r}, '
             'allow_failed_imports=False)\n' if imports else '')
    return fr.write_config(str(path), 'mixco', data, epochs=EPOCHS, fault=', '.join(hooks),
                           extra=extra, **TINY)


def run_env(home: Path, *paths: Path) -> dict:
    """A run's environment (one thread, wandb off, HOME=`home`) with `paths` importable."""
    env = fr.tiny_env(str(home))
    env['PYTHONPATH'] = os.pathsep.join([env['PYTHONPATH'], *map(str, paths)])
    return env


@dataclasses.dataclass
class Reference:
    """An uninterrupted run of `tiny_config`: its process, folders and final weights."""
    proc: subprocess.CompletedProcess
    work: Path
    results: Path
    weights: dict

    @property
    def checkpoint(self) -> str:
        return fr.final_checkpoint(str(self.work), EPOCHS)


def _reference(folder: Path, data: str, nproc: int, env: dict) -> Reference:
    work = folder / 'work'
    proc = fr.train(tiny_config(folder / 'tiny.py', data), str(work), nproc=nproc,
                    no_eval=False, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return Reference(proc, work, work / 'results',
                     fr.load_weights(fr.final_checkpoint(str(work), EPOCHS)))


HAS_WANDB = importlib.util.find_spec('wandb') is not None


@pytest.fixture(scope='session')
def reference_1p(tmp_path_factory, tiny_data) -> Reference:
    """tools/train.py, one process, evaluated into `results`. With wandb installed it logs
    online, with a key, to a server that accepts connections and never answers (the one that
    would cost most without the probe): it must end offline with its record."""
    from tests.engine.test_wandb_fallback import KEY, wandb_server

    def make(folder: Path) -> Reference:
        env = run_env(folder)
        with wandb_server('silent') if HAS_WANDB else nullcontext() as url:
            if url:
                env.update(WANDB_MODE='online', WANDB_API_KEY=KEY, WANDB_BASE_URL=url)
            return _reference(folder, tiny_data, 1, env)
    return once(tmp_path_factory, 'reference-1p', make)


@pytest.fixture(scope='session')
def reference_2p(tmp_path_factory, tiny_data) -> Reference:
    """tools/dist_train.sh, two gloo processes, evaluated into `results`; wandb (installed)
    without credentials in this HOME: it must log offline with one warning."""
    def make(folder: Path) -> Reference:
        env = run_env(folder)
        env.pop('WANDB_MODE')
        return _reference(folder, tiny_data, 2, env)
    return once(tmp_path_factory, 'reference-2p', make)


@pytest.fixture
def reference(request) -> Reference:
    """The shared reference named by an indirect parameter: 'reference_1p' or 'reference_2p'."""
    return request.getfixturevalue(request.param)


# ----------------------------------------------------------------------- processes of a run
def process_tree(root: int) -> list:
    """`root` and every process below it."""
    children = {}
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / 'stat').read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(')', 1)[1].split()[1]), []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def alive(pid: int) -> bool:
    try:
        return (Path('/proc') / str(pid) / 'stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def running(marker: str) -> bool:
    """Some process's command line holds `marker`."""
    for proc in Path('/proc').iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / 'cmdline').read_bytes().decode(
                    errors='replace'):
                return True
        except OSError:
            continue
    return False


def wait_for(condition, timeout: float, what: str,
             proc: Optional[subprocess.Popen] = None) -> None:
    """Poll `condition` until it holds; fail after `timeout` s or when `proc` has ended."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end or (proc is not None and proc.poll() is not None):
            raise AssertionError(f'{what} did not happen')
        time.sleep(0.05)


# After iteration `at_iter` every process says so (a file each) and waits for its pre-emption
# handler to have seen the signal, so that the signal lands at a known step; then it takes
# `slow_s` more seconds (as a large checkpoint on a slow disk would).
PAUSE = """
import time
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from benchmark import dist


@HOOKS.register_module()
class PauseForSignalHook(Hook):
    priority = 'VERY_HIGH'

    def __init__(self, at_iter, flag, slow_s):
        self.at_iter, self.flag, self.slow_s = at_iter, flag, slow_s

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if runner.iter + 1 != self.at_iter:
            return
        preemption = next(h for h in runner.hooks if type(h).__name__ == 'PreemptionHook')
        open(f'{self.flag}.{dist.rank()}', 'w').close()
        end = time.monotonic() + 600
        while preemption.received is None and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(self.slow_s)
"""


def paused_config(folder: Path, data: str, at: int, slow_s: float = 0) -> tuple:
    """(`tiny_config` that pauses after iteration `at` until its signal arrives, the flag
    prefix whose `.<rank>` files say it is there); `folder` must be on the run's PYTHONPATH."""
    (folder / 'signal_pause.py').write_text(PAUSE)
    flag = str(folder / 'reached')
    hook = f"dict(type='PauseForSignalHook', at_iter={at}, flag={flag!r}, slow_s={slow_s})"
    return tiny_config(folder / 'paused.py', data, imports=['signal_pause'], hooks=[hook]), flag


# -------------------------------------------------------------------- the digits suite
def digits_suite_text(epochs: int, batches: int) -> str:
    """A two-run digits suite (MoCo-v2 and MixCo, seed 0, one process) at tiny sizes."""
    return f"""
configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']
seeds = [0]
procs = 1
cfg_options = {{'train_cfg.max_epochs': {epochs}, 'train_dataloader.batch_size': 8,
               'train_dataloader.num_batch_per_epoch': {batches},
               'train_dataloader.num_workers': 0,
               'train_dataloader.persistent_workers': False, 'model.queue_size': 32,
               'custom_hooks.1.num_train': 100, 'custom_hooks.1.num_test': 50,
               'custom_hooks.1.k': 10, 'custom_hooks.2.num_test': 50}}
"""


DIGITS_SUITE = digits_suite_text(epochs=2, batches=8)


@dataclasses.dataclass
class RestartedSuite:
    """`DIGITS_SUITE` (tiny.py in `folder`) run one run at a time, SIGKILLed in its second
    run's second epoch and started again with the same command by two processes at once."""
    folder: Path
    runs: list  # the suite's Run of each entry
    killed_out: str  # what the first attempt printed
    killed_records: int  # records after the kill
    stamps: dict  # the first run's files: mtime, after the kill
    killed_train_log: str  # the second run's training log after the kill
    again: list  # the second attempt: two processes started together (CompletedProcess each)
    command: list
    env: dict


@pytest.fixture(scope='session')
def digits_suite(tmp_path_factory) -> RestartedSuite:
    return once(tmp_path_factory, 'digits-suite', restarted_suite)


def restarted_suite(folder: Path) -> RestartedSuite:
    import benchmark.components  # noqa: F401  registers the suite's types
    from benchmark.suites.spec import expand_suite
    (folder / 'tiny.py').write_text(DIGITS_SUITE)
    cmd = [sys.executable, str(REPO_ROOT / 'tools/run_suite.py'), str(folder / 'tiny.py'),
           '--no-wandb']
    env = dict(fr.tiny_env(), PYTHON=sys.executable)
    runs = expand_suite(str(folder / 'tiny.py'), work_root=str(folder / 'work_dirs')).runs
    first_run, second_run = (Path(run.work_dir) for run in runs)
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: (second_run / 'epoch_1.pth').exists(), 900, "the second run's epoch 1",
                 proc)
        proc.send_signal(signal.SIGKILL)  # the suite dies; its training gets SIGTERM
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: not running(second_run.name), 120, 'the orphaned training to stop')
    records = len(list((folder / 'results/suites/tiny/runs').glob('*.json')))
    stamps = {p: p.stat().st_mtime_ns for p in first_run.iterdir() if p.is_file()}
    killed_log = (second_run / 'suite_train.log').read_text()
    # Restarted from two terminals at once: one resumes the second run, the other passes over it.
    procs = [subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        outs = [proc.communicate(timeout=900) for proc in procs]
        again = [subprocess.CompletedProcess(cmd, proc.returncode, *out)
                 for proc, out in zip(procs, outs)]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return RestartedSuite(folder, runs, out, records, stamps, killed_log, again, cmd, env)
