"""Carrying out a plan: SLURM through stub sbatch/squeue/srun that record their calls, a failing
local run (its row and its log), and SIGTERM reaching the running training."""
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import benchmark.components  # noqa: F401
from benchmark.suites.suite import run_suite
from benchmark.suites.outcome import summary_line
from benchmark.suites.runner import SuiteRunner
from benchmark.suites.plan import plan_suite
from benchmark.suites.slurm import slurm_script
from benchmark.suites.spec import SuiteError, expand_suite
from benchmark.layout import SLURM_JOB_FILE, SLURM_SCRIPT
from benchmark.reports.records import build_record, write_record
from tests.conftest import ROOT

SLURM_SUITE = ("configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']\n"
               "seeds = [0]\nprocs = 2\nevaluations = ['default', 'linear_paper']\n"
               "slurm = dict(time='1:00:00', cpus_per_task=3)\n")
STUB = '#!/usr/bin/env bash\nprintf "%s\\n" "$(basename "$0") $*" >> "$STUB_LOG"\n'


@pytest.fixture
def stubs(tmp_path, monkeypatch):
    """sbatch answers job ids 4241, 4242, ...; squeue lists a job while $SQUEUE_STATE is set;
    srun only records. Every call lands in $STUB_LOG."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'sbatch').write_text(STUB + 'echo "$((4240 + $(grep -c ^sbatch "$STUB_LOG")));cluster"\n')
    (bin_dir / 'squeue').write_text(STUB + '[ -n "${SQUEUE_STATE:-}" ] && echo "$SQUEUE_STATE"\nexit 0\n')
    (bin_dir / 'srun').write_text(STUB)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    log = tmp_path / 'calls.log'
    monkeypatch.setenv('PATH', f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv('STUB_LOG', str(log))
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    monkeypatch.delenv('SQUEUE_STATE', raising=False)
    return log


def calls(log: Path, tool: str):
    return [shlex.split(line)[1:] for line in log.read_text().splitlines()
            if line.split()[0] == tool] if log.exists() else []


class Printed:
    """Stands in for print: keeps the text, `end=''` continuing a line."""

    def __init__(self):
        self.text = ''

    def __call__(self, *args, end='\n', flush=False):
        self.text += ' '.join(map(str, args)) + end


def _run(path, tmp_path, **kwargs):
    printed = Printed()
    code = run_suite(str(path), results_root=str(tmp_path / 'results'),
                     work_root=str(tmp_path / 'work'), use_wandb=False, out=printed, **kwargs)
    return code, printed.text.splitlines()


def test_slurm_submits_one_job_per_run_and_waits_for_queued_ones(tmp_path, stubs, monkeypatch):
    path = tmp_path / 'tiny.py'
    path.write_text(SLURM_SUITE)
    suite = expand_suite(str(path), results_root=str(tmp_path / 'results'),
                         work_root=str(tmp_path / 'work'))
    code, out = _run(path, tmp_path, launcher='slurm', partition='gpu')
    assert code == 0
    first, second = calls(stubs, 'sbatch')
    work = Path(suite.runs[0].work_dir)
    assert first == ['--parsable', '--job-name=tiny.mocov2_r18_digits-s0', '--partition=gpu',
                     '--ntasks=2', '--ntasks-per-node=2', '--gres=gpu:2', '--cpus-per-task=3',
                     f'--output={work}/slurm-%j.out', '--time=1:00:00', '--signal=USR1@120',
                     f'{work}/{SLURM_SCRIPT}']
    assert second[1] == '--job-name=tiny.mixco_r18_digits-s0'
    assert (work / SLURM_JOB_FILE).read_text() == '4241\n'
    assert f'[1/2] mocov2_r18_digits-s0: submitted SLURM job 4241 (start); log {work}/slurm-4241.out' in out
    board = (Path(suite.results_dir) / 'leaderboard.md').read_text()
    assert '| queued |' in board and 'SLURM job 4241' in board

    # The batch script: tools/slurm_train.sh (srun, one task per GPU), then the evaluation.
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(['bash', str(work / SLURM_SCRIPT)], check=True, env=env, cwd=tmp_path)
    train, evaluate = calls(stubs, 'srun')
    assert train[:9] == ['-p', 'gpu', '--job-name=tiny.mocov2_r18_digits-s0', '--gres=gpu:2',
                         '--ntasks=2', '--ntasks-per-node=2', '--cpus-per-task=3',
                         '--kill-on-bad-exit=1', sys.executable]
    assert train[9:] == ['-u', str(ROOT / 'tools/train.py'), str(ROOT / 'configs/mocov2_r18_digits.py'),
                         '--launcher', 'slurm', '--work-dir', str(work), '--results-dir',
                         suite.results_dir, '--resume', '--cfg-options', 'randomness.seed=0']
    assert evaluate[:5] == ['--ntasks=1', '--nodes=1', '--gres=gpu:1', sys.executable,
                            str(ROOT / 'tools/eval.py')]
    assert evaluate[6:9] == [f'{work}/epoch_30.pth', '--protocols', 'linear_paper']

    # Queued or running: nothing submitted again.
    monkeypatch.setenv('SQUEUE_STATE', 'RUNNING')
    code, out = _run(path, tmp_path, launcher='slurm', partition='gpu')
    assert code == 0 and len(calls(stubs, 'sbatch')) == 2
    assert '[1/2] mocov2_r18_digits-s0: queued (SLURM job 4241)' in out
    assert calls(stubs, 'squeue')[-1] == ['-h', '-j', '4242', '-o', '%T']

    # The job ended: run 0 has its training record, so only its evaluation is submitted.
    monkeypatch.delenv('SQUEUE_STATE')
    run = suite.runs[0]
    rec = build_record(method='mocov2', backbone='resnet18', pretrain_data='digits',
                       pretrain_epochs=30, eval_data='digits', seed=0, world_size=2,
                       total_batch=64, protocols={p: {'metrics': {'top1': 1.0}} for p in
                                                  ('knn', 'linear_fast', 'cluster', 'cluster_tsne')})
    write_record(dict(rec, config_sha256=run.config_sha256), suite.results_dir)
    code, out = _run(path, tmp_path, launcher='slurm', partition='gpu')
    assert len(calls(stubs, 'sbatch')) == 4 and '(evaluations)' in out[1]
    script = (work / SLURM_SCRIPT).read_text()
    assert 'slurm_train.sh' not in script and 'tools/eval.py' in script
    fresh = plan_suite(suite, [], job_alive=lambda job: False)[1]  # run 1, nothing recorded
    lines = slurm_script(SuiteRunner(suite, launcher='slurm', partition='gpu'), fresh).splitlines()
    assert lines[1].startswith('# Suite tiny, run mixco_r18_digits-s0')
    assert 'slurm_train.sh' in lines[-2] and 'tools/eval.py' in lines[-1]


def test_slurm_needs_a_partition(tmp_path, stubs):
    path = tmp_path / 'tiny.py'
    path.write_text(SLURM_SUITE)
    with pytest.raises(SuiteError, match='--launcher slurm needs a partition'):
        _run(path, tmp_path, launcher='slurm')


def test_failed_run_is_reported_with_its_log_and_its_row(tmp_path, monkeypatch):
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    path = tmp_path / 'fail.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 1]\n")
    monkeypatch.setattr(SuiteRunner, 'train_command',
                        lambda self, plan: ['bash', '-c', f'echo boom {plan.run.seed}; exit 7'])
    code, out = _run(path, tmp_path)
    log = tmp_path / 'work/suites/fail/mocov2_r18_digits-s0/suite_train.log'
    assert code == 1
    assert out[1:3] == [f'[1/2] mocov2_r18_digits-s0: started; log {log}',
                        f'[1/2] mocov2_r18_digits-s0: started -> failed (exit 7); log {log}']
    assert 'boom 0' in log.read_text()
    assert out[-2].startswith('summary: 2 run(s): 2 failed (failed: mocov2_r18_digits-s0, '
                              'mocov2_r18_digits-s1)')
    board = (tmp_path / 'results/suites/fail/leaderboard.md').read_text()
    rows = [line for line in board.splitlines() if '| kNN | mocov2 |' in line]
    assert len(rows) == 1 and '| this suite | failed | NA |' in rows[0]
    assert f'training failed; log {log}' in rows[0]


def test_sigterm_reaches_the_training_and_stops_the_suite(tmp_path, monkeypatch):
    """The child traps TERM as tools/dist_train.sh does (save, exit 143); the suite stops."""
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    path = tmp_path / 'stop.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 1]\n")
    script = (f"trap 'echo saved; exit 143' TERM; kill -TERM {os.getpid()}; "
              "for i in $(seq 100); do sleep 0.1; done; exit 0")
    monkeypatch.setattr(SuiteRunner, 'train_command', lambda self, plan: ['bash', '-c', script])
    code, out = _run(path, tmp_path)
    assert code == 143
    assert out[2].startswith('[1/2] mocov2_r18_digits-s0: started -> interrupted (exit 143)')
    assert not any('mocov2_r18_digits-s1' in line for line in out[3:-2])  # not started
    assert 'not reached' in out[-2] and 'rerun the same command' in out[-2]
    assert 'saved' in (tmp_path / 'work/suites/stop/mocov2_r18_digits-s0/suite_train.log').read_text()


def test_summary_line_counts():
    from types import SimpleNamespace

    from benchmark.suites.outcome import Outcome
    run = lambda name: SimpleNamespace(name=name)  # noqa: E731
    outcomes = [Outcome(run('a'), 'done'), Outcome(run('b'), 'resumed'),
                Outcome(run('c'), 'started', failed_evals={'linear_paper': 'x.log'}),
                Outcome(run('d'), 'failed', ok=False)]
    assert summary_line(outcomes, 5, False) == ('5 run(s): 1 done before, 1 resumed, 1 started, '
                                                '1 failed (failed: d); 1 evaluation(s) failed; '
                                                '1 not reached')
