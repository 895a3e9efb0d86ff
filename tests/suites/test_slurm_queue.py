"""What the planner learns from SLURM's queue (stub squeue): a job listed is queued, a job SLURM
no longer knows has ended, a failing squeue is asked again and then stops the launch in one
line (never "not queued"); a submission that did not record its job id counts as queued while
a job named after the suite is listed; and a launch claims each run before submitting it, so a
run held by another launch is not submitted twice."""
import pytest

from benchmark.layout import SLURM_JOB_FILE, SLURM_SUBMITTING_FILE
from benchmark.suites import slurm_queue
from benchmark.suites.claim import RunClaim
from benchmark.suites.slurm_queue import (named_jobs_alive, note_submitting, queued_job,
                                          read_submitting, record_job, squeue_alive,
                                          wait_task)
from benchmark.suites.spec import SuiteError
from benchmark.suites.suite import run_suite
from tests.suites.conftest import calls

SUITE = ("configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 1]\nprocs = 1\n"
         "slurm = dict(time=60, partition='debug', gpus_per_node=0)\n")
DOWN = 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)'


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(slurm_queue, 'SQUEUE_RETRY_S', 0.0)


def test_squeue_answers(stubs, monkeypatch, quick):
    assert squeue_alive('7') is False  # ended (squeue lists nothing)
    monkeypatch.setenv('SQUEUE_STATE', 'PENDING')
    assert squeue_alive('7') is True
    assert calls(stubs, 'squeue')[-1] == ['-h', '-j', '7', '-o', '%T']
    monkeypatch.setenv('SQUEUE_FAILS', 'slurm_load_jobs error: Invalid job id specified')
    assert squeue_alive('7_1') is False  # purged: SLURM no longer knows it
    assert len(calls(stubs, 'squeue')) == 3


def test_failing_squeue_is_unknown_asked_again_then_one_line(stubs, monkeypatch, quick):
    monkeypatch.setenv('SQUEUE_FAILS', DOWN)
    with pytest.raises(SuiteError) as err:
        squeue_alive('4241_0')
    message = str(err.value)
    assert '\n' not in message and 'squeue failed 3 times asking about SLURM job 4241_0' in message
    assert f'exit 1: {DOWN}' in message and 'nothing was submitted' in message
    assert len(calls(stubs, 'squeue')) == slurm_queue.SQUEUE_TRIES


def test_without_squeue_nothing_is_queued(tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path))
    assert squeue_alive('5') is False and named_jobs_alive('s') == []


def test_note_without_job_id_is_queued_while_the_suite_has_jobs(tmp_path, stubs, monkeypatch,
                                                                quick):
    work = str(tmp_path / 'run')
    (tmp_path / 'run').mkdir()
    assert queued_job(work, 's') is None and calls(stubs, 'squeue') == []  # nothing to ask
    note_submitting(work, 's')
    assert read_submitting(work)['suite'] == 's'
    monkeypatch.setenv('SQUEUE_STATE', '4241_0\n4241_1')
    assert queued_job(work, 's') == '4241 named s (task not recorded)'
    assert calls(stubs, 'squeue')[-1][:5] == ['-h', '-u', calls(stubs, 'squeue')[-1][2], '-n', 's']
    monkeypatch.delenv('SQUEUE_STATE')
    assert queued_job(work, 's') is None  # no job of the suite left: the note is stale
    record_job(work, '4242_1')
    assert (tmp_path / 'run' / SLURM_JOB_FILE).read_text() == '4242_1\n'
    assert not (tmp_path / 'run' / SLURM_SUBMITTING_FILE).exists()
    monkeypatch.setenv('SQUEUE_STATE', 'RUNNING')
    assert queued_job(work, 's') == '4242_1'


def _launch(tmp_path):
    lines = []
    path = tmp_path / 'two.py'
    path.write_text(SUITE)
    code = run_suite(str(path), launcher='slurm', results_root=str(tmp_path / 'results'),
                     work_root=str(tmp_path / 'work'), use_wandb=False,
                     out=lambda *a, **k: lines.append(' '.join(map(str, a))))
    return code, lines


def test_a_run_claimed_by_another_launch_is_not_submitted(tmp_path, stubs):
    """Launch A holds run s0 (between its plan and its sbatch): launch B submits only s1;
    B's submission leaves the job ids and no note."""
    work = tmp_path / 'work/suites/two'
    (work / 'mocov2_r18_digits-s0').mkdir(parents=True)
    other = RunClaim(str(work / 'mocov2_r18_digits-s0'))
    assert other.take() is None
    try:
        code, lines = _launch(tmp_path)
    finally:
        other.give_up()
    assert code == 0
    assert any(line.startswith('[1/2] mocov2_r18_digits-s0: claimed by another suite process (')
               and line.endswith('; not submitted here') for line in lines), lines
    scripts = calls(stubs, 'sbatch')
    assert len(scripts) == 1 and '#SBATCH --array' not in open(scripts[0][0]).read()
    assert (work / 'mocov2_r18_digits-s1' / SLURM_JOB_FILE).read_text() == '4241\n'
    assert not list(work.glob(f'*/{SLURM_SUBMITTING_FILE}'))
    assert not (work / 'mocov2_r18_digits-s0' / SLURM_JOB_FILE).exists()


def test_a_launch_killed_before_recording_its_job_submits_nothing_again(tmp_path, stubs,
                                                                       monkeypatch, quick):
    work = tmp_path / 'work/suites/two'
    for seed in (0, 1):
        (work / f'mocov2_r18_digits-s{seed}').mkdir(parents=True)
        note_submitting(str(work / f'mocov2_r18_digits-s{seed}'), 'two')
    monkeypatch.setenv('SQUEUE_STATE', '4240_0')  # the first launch's array, still pending
    code, lines = _launch(tmp_path)
    assert code == 0 and calls(stubs, 'sbatch') == []
    assert '[1/2] mocov2_r18_digits-s0: queued (SLURM job 4240 named two (task not recorded))' \
        in lines


def test_failing_squeue_submits_nothing(tmp_path, stubs, monkeypatch, quick):
    work = tmp_path / 'work/suites/two/mocov2_r18_digits-s0'
    work.mkdir(parents=True)
    (work / SLURM_JOB_FILE).write_text('4240_0\n')
    monkeypatch.setenv('SQUEUE_FAILS', DOWN)
    with pytest.raises(SuiteError, match=r'^run mocov2_r18_digits-s0: squeue failed 3 times') as err:
        _launch(tmp_path)
    assert '\n' not in str(err.value) and calls(stubs, 'sbatch') == []


class Task:
    """A submitted task as submitit shows it: done() once `finish` is set (its result file)."""

    def __init__(self, folder):
        self.job_id = '9_0'
        self.paths = type('Paths', (), {'result_pickle': folder / '9_0_result.pkl'})()

    def done(self):
        return self.paths.result_pickle.exists()


def test_wait_ends_for_a_task_that_left_the_queue_without_a_result(tmp_path):
    task, asked = Task(tmp_path), []
    assert wait_task(task, alive=lambda job: asked.append(job) or False, poll_s=0) is False
    assert asked == ['9_0'] * slurm_queue.WAIT_MISSES


def test_wait_goes_on_while_the_task_is_listed_or_squeue_fails(tmp_path):
    task, answers = Task(tmp_path), iter([True, False, False, 'fail', False, False, True])

    def alive(job):
        answer = next(answers)
        if answer == 'fail':
            raise SuiteError('squeue failed 3 times')
        if answer is True and task.paths.result_pickle.parent.exists() and len(calls) > 3:
            task.paths.result_pickle.write_text('done')  # the task writes its result
        calls.append(answer)
        return answer
    calls = []
    assert wait_task(task, alive=alive, poll_s=0) is True
    assert calls == [True, False, False, False, False, True]  # never three misses in a row
