"""End to end: a one-run suite submitted with --launcher slurm through submitit's local executor
(slurm=dict(cluster='local'): the array's task runs on this machine, as real processes). Its
task gets the pre-emption signal in the middle of training, stops the training (which saves and
exits 143), is requeued by submitit, resumes and finishes with the weights of the uninterrupted
run (tests/e2e/conftest.py's, one process), bit for bit; the suite's table then has the run's
record. The run is the shared tiny config with a hook that holds iteration 11 (epoch 2) until
the signal has arrived, so that it lands in the middle of training on any machine.

submitit's ``LocalJob._interrupt`` signals the job's controller, which the local executor does
not set up to pass the signal on, so the test signals the task process itself, as SLURM does."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import benchmark.components  # noqa: F401
from benchmark.harness.faults.runs import differing, load_weights
from benchmark.suites.spec import expand_suite
from tests.conftest import ROOT
from tests.e2e.conftest import EPOCHS, STEPS, paused_config, run_env, wait_for

AT = 11  # epoch 2, batch 3 of 8
SUITE = """
configs = [{config!r}]
seeds = [0]
procs = 1
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


def test_preempted_task_is_requeued_and_ends_bit_identical(tmp_path, tiny_data, reference_1p,
                                                           monkeypatch):
    config, flag = paused_config(tmp_path, tiny_data, AT)
    monkeypatch.syspath_prepend(str(tmp_path))  # expand_suite checks the config's imports
    suite_file = tmp_path / 'tiny.py'
    suite_file.write_text(SUITE.format(config=config))
    env = dict(run_env(tmp_path, tmp_path), PYTHON=sys.executable)
    cmd = [sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite_file), '--no-wandb',
           '--launcher', 'slurm', '--partition', 'any', '--wait']
    run = expand_suite(str(suite_file), work_root=str(tmp_path / 'work_dirs')).runs[0]
    work = Path(run.work_dir)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: os.path.exists(f'{flag}.0'), 900, f'iteration {AT} of the run', proc)
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
    assert f'iter_{AT}.pth after iteration {AT}' in train_log, train_log[-3000:]
    assert f'resumed epoch: {AT // STEPS[1]}, iter: {AT}' in train_log
    job_logs = ''.join(p.read_text() for p in (work.parent / 'submitit').glob('*/*_log.*'))
    assert 'Caught signal SIGUSR2' in job_logs and 'Requeued job' in job_logs
    records = list((tmp_path / 'results/suites/tiny/runs').glob('*.json'))
    assert len(records) == 1
    final = load_weights(str(work / f'epoch_{EPOCHS}.pth'))
    assert differing(reference_1p.weights, final) == []

    # Rerunning the suite submits nothing and renders the table with the run's record.
    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.splitlines()[1] == f'[1/1] {run.name}: done (records exist)'
    board = (tmp_path / 'results/suites/tiny/leaderboard.md').read_text()
    rows = [line for line in board.splitlines() if '| kNN | MixCo (MoCo-v2)' in line]
    assert len(rows) == 1 and '| this suite | ok |' in rows[0], board
