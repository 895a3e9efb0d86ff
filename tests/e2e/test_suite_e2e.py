"""End to end: a real two-run suite on digits (tiny sizes through the suite's cfg_options),
killed with SIGKILL in its second run and restarted with the same command: the first run is
not trained again (its files keep their mtimes), the second resumes, the table has both."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import benchmark.components  # noqa: F401
from benchmark.suites.spec import expand_suite
from tests.conftest import ROOT

SUITE = """
configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']
seeds = [0]
procs = 1
cfg_options = {'train_cfg.max_epochs': 2, 'train_dataloader.batch_size': 8,
               'train_dataloader.num_batch_per_epoch': 8, 'train_dataloader.num_workers': 0,
               'train_dataloader.persistent_workers': False, 'model.queue_size': 32,
               'custom_hooks.1.num_train': 100, 'custom_hooks.1.num_test': 50,
               'custom_hooks.1.k': 10, 'custom_hooks.2.num_test': 50}
"""


def _running(marker: str) -> bool:
    """Some process's command line holds `marker` (a run's name)."""
    for proc in Path('/proc').iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / 'cmdline').read_bytes().decode(errors='replace'):
                return True
        except OSError:
            continue
    return False


def _wait_for(condition, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(0.05)


def test_killed_suite_restarts_without_retraining(tmp_path, subprocess_env):
    suite = tmp_path / 'tiny.py'
    suite.write_text(SUITE)
    cmd = [sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite), '--no-wandb']
    env = dict(subprocess_env, PYTHON=sys.executable)
    spec = expand_suite(str(suite), work_root=str(tmp_path / 'work_dirs'))
    first_run, second_run = (Path(run.work_dir) for run in spec.runs)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(lambda: (second_run / 'epoch_1.pth').exists(), 900, "the second run's epoch 1")
        proc.send_signal(signal.SIGKILL)  # the suite dies; its training gets SIGTERM
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    _wait_for(lambda: not _running(second_run.name), 120, 'the orphaned training to stop')
    assert '[1/2] mocov2_r18_digits' in out and '-> ok in' in out, out
    records = tmp_path / 'results/suites/tiny/runs'
    assert len(list(records.glob('*.json'))) == 1
    stamps = {p: p.stat().st_mtime_ns for p in first_run.iterdir() if p.is_file()}
    train_log = (second_run / 'suite_train.log').read_text()
    assert 'saved' in train_log and 'exiting with 143' in train_log  # saved on the way out

    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    lines = again.stdout.splitlines()
    assert lines[1] == f'[1/2] {first_run.name}: done (records exist)'
    assert lines[2].startswith(f'[2/2] {second_run.name}: resumed from ')
    ended = [line for line in lines if line.startswith(f'[2/2] {second_run.name}: resumed from ')
             and ' -> ' in line]
    assert len(ended) == 1 and ended[0].endswith('s') and '-> ok in' in ended[0]
    assert lines[-2] == 'summary: 2 run(s): 1 done before, 1 resumed'
    # The first run was not trained again: every file it wrote is untouched.
    assert {p: p.stat().st_mtime_ns for p in first_run.iterdir() if p.is_file()} == stamps
    assert (first_run / 'suite_train.log').read_text().count('\n==== ') == 1
    assert (second_run / 'suite_train.log').read_text().count('\n==== ') == 2
    found = [json.loads(p.read_text()) for p in records.glob('*.json')]
    assert sorted(r['method'] for r in found) == ['mixco', 'mocov2']
    assert all({'knn', 'linear_fast', 'online_linear'} <= set(r['protocols']) for r in found)
    mixco = next(r for r in found if r['method'] == 'mixco')
    assert mixco['pretrain_epochs'] == 2 and mixco['protocols']['online_linear']['settings']['epoch'] == 2
    board = (tmp_path / 'results/suites/tiny/leaderboard.md').read_text()
    knn_rows = [line for line in board.splitlines() if '| kNN |' in line]
    assert len(knn_rows) == 2 and all('| ok |' in row and '(n=1)' in row for row in knn_rows)
    assert any('| linear, online (during pretraining) | mixco |' in line for line in board.splitlines())
    assert (tmp_path / 'results/suites/tiny/curves.png').is_file()
    # A third time: nothing to do.
    third = subprocess.run(cmd + ['--dry-run'], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert third.stdout.splitlines()[-1] == 'plan: 2 skip (done); 0 evaluation(s) to run'
    assert os.path.getsize(tmp_path / 'results/suites/tiny/leaderboard.csv') > 0
