"""End to end: a one-run suite submitted with --launcher slurm through submitit's local executor
(slurm=dict(cluster='local'): the array's task runs on this machine, as real processes). The
task trains the shared tiny config and ends with the weights of the uninterrupted run
(tests/e2e/conftest.py's, one process), bit for bit; the suite's table has the run's record,
and a rerun (in-process) submits nothing. Pre-emption, requeue and resume through submitit run
on a real SLURM (tests/e2e/test_real_slurm.py)."""
import subprocess
import sys
from pathlib import Path

import benchmark.components  # noqa: F401
from benchmark.harness.faults.runs import differing, load_weights
from benchmark.suites.spec import expand_suite
from tests.conftest import ROOT
from tests.e2e.conftest import EPOCHS, run_env, tiny_config
from tools import run_suite

SUITE = """
configs = [{config!r}]
seeds = [0]
procs = 1
slurm = dict(cluster='local', time='2:00:00')
"""


def test_a_task_through_the_local_executor_trains_and_records(tmp_path, tiny_data, reference_1p,
                                                             run_main, monkeypatch):
    config = tiny_config(tmp_path / 'tiny_run.py', tiny_data)
    suite_file = tmp_path / 'tiny.py'
    suite_file.write_text(SUITE.format(config=config))
    env = dict(run_env(tmp_path, tmp_path), PYTHON=sys.executable)
    cmd = [sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite_file), '--no-wandb',
           '--launcher', 'slurm', '--partition', 'any', '--wait']
    run = expand_suite(str(suite_file), work_root=str(tmp_path / 'work_dirs')).runs[0]
    work = Path(run.work_dir)
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    lines = out.splitlines()
    assert lines[1].startswith('submitted 1 task(s) to this machine through submitit')
    assert lines[4].startswith(f'[1/1] {run.name}: task ') and lines[4].endswith('-> ok (started)')
    records = list((tmp_path / 'results/suites/tiny/runs').glob('*.json'))
    assert len(records) == 1
    final = load_weights(str(work / f'epoch_{EPOCHS}.pth'))
    assert differing(reference_1p.weights, final) == []

    # Rerunning the suite (in-process) submits nothing and renders the table with the record.
    monkeypatch.chdir(tmp_path)
    code, again, err, _ = run_main(run_suite, *cmd[2:])
    assert code == 0, again[-3000:] + err[-3000:]
    assert again.splitlines()[1] == f'[1/1] {run.name}: done (records exist)'
    board = (tmp_path / 'results/suites/tiny/leaderboard.md').read_text()
    rows = [line for line in board.splitlines() if '| kNN | MixCo (MoCo-v2)' in line]
    assert len(rows) == 1 and '| this suite | ok |' in rows[0], board
