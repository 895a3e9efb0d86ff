"""A SLURM array task and SIGTERM (scancel, scontrol requeue, pre-emption; under proctrack/cgroup
SLURM signals the task only): the task passes it on to its training, which saves and exits 143,
then asks SLURM what became of the job. The same on a real SLURM: tests/e2e/test_real_slurm.py."""
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmark.suites.parent_death import die_with_parent
from benchmark.suites.slurm_task import RunTask, Step, descendants, job_state, kill_wait_s

# The training as tools/dist_train.sh behaves: SIGTERM -> save, exit 143. It signals the task
# (this process) itself once its trap is set, as scancel would.
TRAINING = "trap 'echo saved; exit 143' TERM; kill -TERM $PPID; for i in $(seq 300); do sleep 0.1; done"


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """A `scontrol` on PATH that logs its arguments and prints the job's state and restarts
    as SLURM's does (`$STATE`, `$RESTARTS`), and KillWait (`$KILLWAIT`, default 30)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'scontrol').write_text(
        '#!/usr/bin/env bash\necho "$*" >> "$SCONTROL_LOG"\n'
        'if [ "$2" = config ]; then echo "KillWait                = ${KILLWAIT:-30} sec"\n'
        'elif [ "$1" = show ]; then echo "JobId=$4 JobName=t JobState=$STATE Reason=None Requeue=1 Restarts=$RESTARTS BatchFlag=1"; fi\n')
    (bin_dir / 'scontrol').chmod(0o755)
    monkeypatch.setenv('PATH', f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv('SCONTROL_LOG', str(tmp_path / 'scontrol.log'))
    monkeypatch.setenv('SLURM_JOB_ID', '77')
    monkeypatch.setenv('SLURM_RESTART_COUNT', '1')  # this is the job's second start
    monkeypatch.setenv('RESTARTS', '1')
    return tmp_path / 'scontrol.log'


def job_calls(log):
    """The scontrol calls about the job (KillWait is read when the child is slow to end)."""
    return [line for line in log.read_text().splitlines() if line != 'show config']


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
    assert job_calls(scontrol) == ['show job -o 77'] + (['requeue 77'] if requeues else [])
    assert signal.getsignal(signal.SIGTERM) is before  # the task's handler is gone


@pytest.mark.parametrize('state', ['COMPLETING', 'CANCELLED'])
def test_a_cancelled_job_fails_saying_so(tmp_path, scontrol, monkeypatch, state):
    """scancel: no restart counted; the task fails saying what to do (its training saved)."""
    monkeypatch.setenv('STATE', state)
    with pytest.raises(RuntimeError, match=rf'run r: stopped by SIGTERM \(job 77 {state}\) after '
                                           r'its training saved a checkpoint; rerun the suite'):
        _task(tmp_path)()
    assert job_calls(scontrol) == ['show job -o 77']


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


# A training that does not end on SIGTERM (a save stuck on a slow file system), with a
# process below it in a session of its own, as torchrun's workers are.
STUCK = ("trap '' TERM; setsid sleep 300 & echo $! > {pids}; kill -TERM $PPID; "
         "for i in $(seq 600); do sleep 0.1; done")


def _alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as handle:  # a zombie waiting for its parent is dead
            return handle.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def _gone(pid, timeout=10):
    end = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return not _alive(pid)


def test_a_child_stuck_after_sigterm_is_killed_within_slurms_killwait(tmp_path, scontrol,
                                                                     monkeypatch, capfd):
    """SIGTERM to the task, its training does not end: killed (with what runs below it) once
    KillWait less the task's margin has passed, so the task can still act on the job."""
    monkeypatch.setenv('STATE', 'CANCELLED')
    monkeypatch.setenv('KILLWAIT', '6')  # 6 s - 5 s margin: killed after 1 s
    assert kill_wait_s() == 6.0
    pids = tmp_path / 'pids'
    task = RunTask('r', Step('train', ['bash', '-c', STUCK.format(pids=pids)],
                             str(tmp_path / 'train.log')), [], sys.executable)
    with pytest.raises(RuntimeError, match=r'stopped by SIGTERM \(job 77 CANCELLED\)'):
        task()
    assert 'run r: its train did not end after SIGTERM; killed before SLURM kills the job' \
        in capfd.readouterr().out
    assert _gone(int(pids.read_text()))


def test_checkpoint_waits_for_the_save_at_most_its_budget(tmp_path, scontrol):
    """The time-limit warning: checkpoint() stops waiting after checkpoint_wait_s, kills the
    training and still hands the task back for requeueing (its step not counted as done)."""
    pids = tmp_path / 'pids'
    task = RunTask('r', None, [], sys.executable, checkpoint_wait_s=0.5)
    task._proc = subprocess.Popen(['bash', '-c', STUCK.format(pids=pids).replace(
        'kill -TERM $PPID; ', '')], start_new_session=True)
    task._step = Step('train', [], str(tmp_path / 'train.log'))
    while not pids.exists() or not pids.read_text().strip():
        time.sleep(0.05)
    resubmit = task.checkpoint()
    assert resubmit.function is task and task.done == []
    assert task._proc.wait(timeout=10) == -signal.SIGKILL
    assert _gone(int(pids.read_text()))


def test_descendants_reaches_processes_in_sessions_of_their_own(tmp_path):
    pids = tmp_path / 'pids'
    proc = subprocess.Popen(['bash', '-c', f'setsid sleep 30 & echo $! > {pids}; sleep 30'])
    try:
        while not pids.exists() or not pids.read_text().strip():
            time.sleep(0.05)
        assert int(pids.read_text()) in descendants(proc.pid)
        assert descendants(int(pids.read_text())) == []
    finally:
        for pid in [*descendants(proc.pid), proc.pid]:
            os.kill(pid, signal.SIGKILL)
        proc.wait()


def test_kill_wait_defaults_to_slurms_without_scontrol(monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    assert kill_wait_s() == 30.0


def test_a_task_loads_without_torch():
    """A SLURM task's process imports this module to unpickle its task, and again at each
    requeue: it loads in a fraction of a second, without torch, scipy or mmengine."""
    heavy = ('torch', 'scipy', 'mmengine', 'lightly')
    out = subprocess.run(
        [sys.executable, '-c', 'import sys, benchmark.suites.slurm_task, benchmark.suites.'
         f'parent_death; print([m for m in {heavy!r} if m in sys.modules])'],
        capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == '[]', out.stdout + out.stderr


def test_a_child_set_to_die_with_its_parent_gets_sigterm_when_it_dies():
    """die_with_parent (the preexec of every child of a task or a suite): the parent exits
    without a word to its child, which ends all the same."""
    assert callable(die_with_parent)
    script = ('import subprocess; from benchmark.suites.parent_death import die_with_parent; '
              "child = subprocess.Popen(['sleep', '60'], preexec_fn=die_with_parent); "
              'print(child.pid, flush=True)')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                         timeout=120, check=True)
    assert _gone(int(out.stdout))


def test_a_sigterm_taken_before_the_child_was_recorded_still_reaches_it(tmp_path, scontrol,
                                                                       monkeypatch):
    """In a task with other threads the SIGTERM may be handled while the child is being
    started (the mask holds one thread only): the child still gets it at once, not after
    SLURM's KillWait."""
    monkeypatch.setenv('STATE', 'CANCELLED')
    quiet = "trap 'echo saved; exit 143' TERM; for i in $(seq 300); do sleep 0.1; done"
    task = RunTask('r', Step('train', ['bash', '-c', quiet], str(tmp_path / 'train.log')), [],
                   sys.executable)
    task._stopped = True  # as a handler run on another thread leaves it
    start = time.monotonic()
    with pytest.raises(RuntimeError, match='stopped by SIGTERM'):
        task()
    assert time.monotonic() - start < 10  # KillWait is 30 s here: the child was signalled
    assert 'saved' in (tmp_path / 'train.log').read_text()
