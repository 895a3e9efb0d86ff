"""End to end: a one-run suite submitted with --launcher slurm through submitit's local executor
(slurm=dict(cluster='local'): the array's task runs on this machine, as real processes). Its
task gets the pre-emption signal in the middle of training, stops the training (which saves and
exits 143), is requeued by submitit, resumes and finishes with the weights of an uninterrupted
run, bit for bit; the suite's table then has the run's record.

submitit's ``LocalJob._interrupt`` signals the job's controller, which the local executor does
not set up to pass the signal on, so the test signals the task process itself, as SLURM does."""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import benchmark.components  # noqa: F401
from benchmark.harness.faults.runs import differing, load_weights
from benchmark.suites.spec import expand_suite
from tests.conftest import ROOT

EPOCHS = 4
SUITE = f"""
configs = ['configs/mocov2_r18_digits.py']
seeds = [0]
procs = 1
cfg_options = {{'train_cfg.max_epochs': {EPOCHS}, 'train_dataloader.batch_size': 8,
               'train_dataloader.num_batch_per_epoch': 16, 'train_dataloader.num_workers': 0,
               'train_dataloader.persistent_workers': False, 'model.queue_size': 32,
               'custom_hooks.1.num_train': 100, 'custom_hooks.1.num_test': 50,
               'custom_hooks.1.k': 10, 'custom_hooks.2.num_test': 50}}
slurm = dict(cluster='local', time='2:00:00')
"""


def task_pids(folder: Path):
    """Processes running a submitit task of `folder` (python -m submitit.core._submit)."""
    found = []
    for proc in Path('/proc').iterdir():
        try:
            cmd = (proc / 'cmdline').read_bytes().split(b'\0')
        except OSError:
            continue
        if proc.name.isdigit() and b'submitit.core._submit' in cmd and any(
                str(folder).encode() in part for part in cmd):
            found.append(int(proc.name))
    return found


def _wait_for(condition, timeout: float, what: str, proc=None) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end or (proc is not None and proc.poll() is not None):
            raise AssertionError(f'{what} did not happen')
        time.sleep(0.05)


def test_preempted_task_is_requeued_and_ends_bit_identical(tmp_path, subprocess_env):
    suite_file = tmp_path / 'tiny.py'
    suite_file.write_text(SUITE)
    env = dict(subprocess_env, PYTHON=sys.executable)
    cmd = [sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite_file), '--no-wandb',
           '--launcher', 'slurm', '--partition', 'any', '--wait']
    run = expand_suite(str(suite_file), work_root=str(tmp_path / 'work_dirs')).runs[0]
    work = Path(run.work_dir)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(lambda: (work / 'epoch_1.pth').exists(), 900, 'epoch 1 of the run', proc)
        tasks = task_pids(tmp_path / 'work_dirs')
        assert len(tasks) == 1
        os.kill(tasks[0], signal.SIGUSR2)  # what SLURM sends before the time limit
        out, _ = proc.communicate(timeout=1800)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    lines = out.splitlines()
    assert lines[1].startswith('submitted 1 task(s) to this machine through submitit')
    assert lines[4].startswith(f'[1/1] {run.name}: task ') and lines[4].endswith('-> ok (started)')

    # The training saved and exited 143, the task was requeued and the training resumed.
    train_log = (work / 'suite_train.log').read_text()
    assert train_log.count('\n==== ') == 2 and 'exiting with 143' in train_log
    saved = re.search(r'saved \S+/(iter_\d+)\.pth after iteration (\d+)', train_log)
    assert saved and 16 < int(saved.group(2)) < 16 * EPOCHS, train_log[-3000:]
    at = int(saved.group(2))
    assert f'resumed epoch: {at // 16}, iter: {at}' in train_log
    job_logs = ''.join(p.read_text() for p in (work.parent / 'submitit').glob('*/*_log.*'))
    assert 'Caught signal SIGUSR2' in job_logs and 'Requeued job' in job_logs
    records = list((tmp_path / 'results/suites/tiny/runs').glob('*.json'))
    assert len(records) == 1

    # The same run uninterrupted, through the same command.
    reference = tmp_path / 'reference'
    done = subprocess.run(['bash', str(ROOT / 'tools/dist_train.sh'),
                           str(ROOT / 'configs/mocov2_r18_digits.py'), '1', '--work-dir',
                           str(reference), '--results-dir', str(tmp_path / 'reference_results'),
                           '--no-eval', '--cfg-options', *run.option_args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    final = f'epoch_{EPOCHS}.pth'
    assert differing(load_weights(str(reference / final)), load_weights(str(work / final))) == []

    # Rerunning the suite submits nothing and renders the table with the run's record.
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.splitlines()[1] == f'[1/1] {run.name}: done (records exist)'
    board = (tmp_path / 'results/suites/tiny/leaderboard.md').read_text()
    rows = [line for line in board.splitlines() if line.startswith('| digits | kNN | mocov2')]
    assert len(rows) == 1 and '| this suite | ok |' in rows[0], board
