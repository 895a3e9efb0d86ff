"""A SLURM array task and SIGTERM (scancel, scontrol requeue, pre-emption; under proctrack/cgroup
SLURM signals the task only): the task passes it on to its training, which saves and exits 143,
then asks SLURM what became of the job. The same on a real SLURM: tests/e2e/test_real_slurm.py."""
import os
import signal
import sys

import pytest

from benchmark.suites.slurm_task import RunTask, Step, job_state

# The training as tools/dist_train.sh behaves: SIGTERM -> save, exit 143. It signals the task
# (this process) itself once its trap is set, as scancel would.
TRAINING = "trap 'echo saved; exit 143' TERM; kill -TERM $PPID; for i in $(seq 300); do sleep 0.1; done"


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """A `scontrol` on PATH that logs its arguments and prints the job's state and restarts
    as SLURM's does (`$STATE`, `$RESTARTS`)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'scontrol').write_text(
        '#!/usr/bin/env bash\necho "$*" >> "$SCONTROL_LOG"\n'
        'if [ "$1" = show ]; then echo "JobId=$4 JobName=t JobState=$STATE Reason=None Requeue=1 Restarts=$RESTARTS BatchFlag=1"; fi\n')
    (bin_dir / 'scontrol').chmod(0o755)
    monkeypatch.setenv('PATH', f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv('SCONTROL_LOG', str(tmp_path / 'scontrol.log'))
    monkeypatch.setenv('SLURM_JOB_ID', '77')
    monkeypatch.setenv('SLURM_RESTART_COUNT', '1')  # this is the job's second start
    monkeypatch.setenv('RESTARTS', '1')
    return tmp_path / 'scontrol.log'


def _task(tmp_path, evals=()):
    train = Step('train', ['bash', '-c', TRAINING], str(tmp_path / 'train.log'))
    return RunTask('r', train, [Step(e, ['true'], str(tmp_path / f'{e}.log')) for e in evals],
                   sys.executable)


@pytest.mark.parametrize('state, restarts, requeues', [('COMPLETING', '2', False),
                                                       ('PENDING', '2', False),
                                                       ('PREEMPTED', '1', True)])
def test_a_requeued_or_preempted_job_ends_without_a_result(tmp_path, scontrol, monkeypatch, state,
                                                          restarts, requeues):
    """Requeued by SLURM (a restart counted at once, while the job is still COMPLETING, as a real
    SLURM shows it): the task exits without a result (SLURM starts it again and the training
    resumes). Pre-empted without a requeue: it requeues itself first."""
    monkeypatch.setenv('STATE', state)
    monkeypatch.setenv('RESTARTS', restarts)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as ended:
        _task(tmp_path, evals=['knn'])()
    assert ended.value.code == 143
    assert 'saved' in (tmp_path / 'train.log').read_text()  # the training got it
    assert not (tmp_path / 'knn.log').exists()  # nothing ran after it
    calls = scontrol.read_text().splitlines()
    assert calls == ['show job -o 77'] + (['requeue 77'] if requeues else [])
    assert signal.getsignal(signal.SIGTERM) is before  # the task's handler is gone


@pytest.mark.parametrize('state', ['COMPLETING', 'CANCELLED'])
def test_a_cancelled_job_fails_saying_so(tmp_path, scontrol, monkeypatch, state):
    """scancel: no restart counted; the task fails saying what to do (its training saved)."""
    monkeypatch.setenv('STATE', state)
    with pytest.raises(RuntimeError, match=rf'run r: stopped by SIGTERM \(job 77 {state}\) after '
                                           r'its training saved a checkpoint; rerun the suite'):
        _task(tmp_path)()
    assert scontrol.read_text().splitlines() == ['show job -o 77']


def test_without_slurm_the_task_fails_saying_the_state_is_unknown(tmp_path, monkeypatch):
    monkeypatch.delenv('SLURM_JOB_ID', raising=False)
    with pytest.raises(RuntimeError, match=r'stopped by SIGTERM \(job \? state unknown\)'):
        _task(tmp_path)()
    assert 'saved' in (tmp_path / 'train.log').read_text()


def test_job_state_reads_scontrol_and_says_none_when_it_cannot(scontrol, monkeypatch):
    monkeypatch.setenv('STATE', 'REQUEUE_HOLD')
    monkeypatch.setenv('RESTARTS', '3')
    assert job_state('77') == ('REQUEUE_HOLD', 3)
    monkeypatch.setenv('PATH', '/nonexistent')
    assert job_state('77') is None
