"""End to end: a scheduler's pre-emption signal as a cluster delivers it. SLURM's pre-emption
and scancel send SIGTERM to every process of the job at once (tools/dist_train.sh, torchrun, the
training processes, their loader workers); `kill -- -PGID` sends it to the launch's process
group. Either way a real tiny run through tools/dist_train.sh (1 and 2 gloo processes, one
loader worker each) signalled in the middle of an epoch saves that iteration's checkpoint and
exits 143, leaves no process behind, and `--resume` ends with the weights of an uninterrupted
run bit for bit. (Before, torchrun stopped the training processes, SIGKILLing those that took
longer than its grace, and the loader workers died: exit 1, no checkpoint.)"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmark.data.fakes import make_fake_tiny_imagenet
from benchmark.harness.faults import runs as fr
from benchmark.layout import PREEMPTED_MARKER, REPO_ROOT

EPOCHS, AT = 2, 3  # signalled after iteration 3: mid-epoch with 8 (1 process) or 4 steps (2)
# After iteration `at_iter` every process says so (a file each) and waits for its pre-emption
# handler to have seen the signal, so that the signal lands at a known step; then it takes
# `slow_s` more seconds, as a large checkpoint on a slow disk would, longer than torchrun's grace
# (TORCH_ELASTIC_SHUTDOWN_TIMEOUT=1 below): torchrun acting on the signal would SIGKILL the run.
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


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """32 training images of 32 px."""
    return str(make_fake_tiny_imagenet(tmp_path_factory.mktemp('data'), num_classes=2,
                                       train_per_class=16, val_per_class=2, size=32))


def _config(folder: Path, data: str, pause_flag: str = '') -> str:
    """The tiny MixCo config (one loader worker, no periodic iteration checkpoint), with the
    pause hook when `pause_flag` is given."""
    name = 'paused' if pause_flag else 'plain'
    extra = ''
    fault = ''
    if pause_flag:
        (folder / 'signal_pause.py').write_text(PAUSE)
        extra = (f'custom_imports = dict(imports={fr.IMPORTS + ["signal_pause"]!r}, '
                 'allow_failed_imports=False)\n')
        fault = f"dict(type='PauseForSignalHook', at_iter={AT}, flag={pause_flag!r}, slow_s=4)"
    return fr.write_config(str(folder / f'{name}.py'), 'mixco', data, epochs=EPOCHS, workers=1,
                           iter_interval=0, fault=fault, extra=extra)


def _env(folder: Path) -> dict:
    env = fr.tiny_env(str(folder))
    env.update(PYTHON=sys.executable, PORT=str(fr.free_port()),
               PYTHONPATH=os.pathsep.join([env['PYTHONPATH'], str(folder)]))
    return env


@pytest.fixture(scope='module')
def references(tmp_path_factory, data):
    """nproc -> the final weights of an uninterrupted run through tools/dist_train.sh."""
    found = {}

    def weights(nproc: int) -> dict:
        if nproc not in found:
            folder = tmp_path_factory.mktemp(f'reference-{nproc}')
            work = str(folder / 'work')
            done = fr.train(_config(folder, data), work, nproc=nproc, torchrun=True,
                            env=_env(folder), timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            found[nproc] = fr.load_weights(fr.final_checkpoint(work, EPOCHS))
        return found[nproc]
    return weights


def _tree(root: int) -> list:
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


def _alive(pid: int) -> bool:
    try:
        return (Path('/proc') / str(pid) / 'stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def _wait_for(condition, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(0.05)


@pytest.mark.parametrize('nproc, to', [(1, 'group'), (1, 'every process'), (2, 'group'),
                                       (2, 'every process')])
def test_a_whole_job_sigterm_saves_exits_143_and_resumes_bit_identical(nproc, to, tmp_path, data,
                                                                      references):
    work = tmp_path / 'work'
    flag = str(tmp_path / 'reached')
    env = dict(_env(tmp_path), TORCH_ELASTIC_SHUTDOWN_TIMEOUT='1')
    cmd = ['bash', str(REPO_ROOT / 'tools' / 'dist_train.sh'), _config(tmp_path, data, flag),
           str(nproc), '--work-dir', str(work), '--no-eval']
    with open(tmp_path / 'killed.log', 'w') as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own process group, as a job's
        try:
            _wait_for(lambda: all(os.path.exists(f'{flag}.{r}') for r in range(nproc))
                      or proc.poll() is not None, 600, f'iteration {AT}')
            tree = _tree(proc.pid)
            # dist_train.sh, torchrun, each training process and its loader worker
            assert len(tree) == 2 + 2 * nproc, tree
            if to == 'group':
                os.killpg(proc.pid, signal.SIGTERM)
            else:
                for pid in tree:
                    os.kill(pid, signal.SIGTERM)
            code = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    output = (tmp_path / 'killed.log').read_text()
    assert code == 143, output[-3000:]
    assert (work / f'iter_{AT}.pth').is_file() and (work / PREEMPTED_MARKER).read_text() == f'{AT}\n'
    assert fr.referenced_corrupt(str(work)) == []
    _wait_for(lambda: not any(_alive(p) for p in tree), 120, 'the job to leave no process')
    resumed = fr.train(_config(tmp_path, data), str(work), nproc=nproc, torchrun=True,
                       resume=True, env=_env(tmp_path), timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = fr.load_weights(fr.final_checkpoint(str(work), EPOCHS))
    assert fr.differing(references(nproc), final) == []
