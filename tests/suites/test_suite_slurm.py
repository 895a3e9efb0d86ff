"""The SLURM launcher: the suite's slurm keys as submitit parameters and the sbatch script
submitit writes for the array (through stub sbatch/srun/squeue that record their calls), the
job ids the planner reads back, bad keys refused before anything is submitted, and a task
requeued through submitit's local executor (real processes, stand-in commands)."""
import json
import os
import re
import signal
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
import submitit

import benchmark.components  # noqa: F401
from benchmark.layout import SLURM_JOB_FILE
from benchmark.names import DEFAULT_PROTOCOLS
from benchmark.reports.records import build_record, write_record
from benchmark.suites.plan import plan_suite
from benchmark.suites.runner import SuiteRunner
from benchmark.suites.slurm import (PARAMETERS, SUBMITIT_PRIVATE_API, make_executor, run_task,
                                    time_minutes)
from benchmark.suites.slurm_task import RunTask, Step
from benchmark.suites.snapshot import in_snapshot, snapshot_name
from benchmark.reports.provenance import git_state
from benchmark.suites.spec import SLURM_KEYS, SuiteError, expand_suite
from benchmark.suites.suite import run_suite
from tests.conftest import ROOT
from tests.suites.conftest import calls

SLURM_SUITE = ("configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']\n"
               "seeds = [0]\nprocs = 2\nevaluations = ['default', 'linear_paper']\n"
               "slurm = dict(time='1:00:00', cpus_per_task=6, mem='32G', account='proj', "
               "qos='high', constraint='a100', array_parallelism=1, "
               "extra=dict(mail_type='END'))\n")
class Printed:
    """Stands in for print: keeps the lines."""

    def __init__(self):
        self.lines = []

    def __call__(self, *args, end='\n', flush=False):
        self.lines.append(' '.join(map(str, args)))


def _run(path, tmp_path, **kwargs):
    printed = Printed()
    code = run_suite(str(path), results_root=str(tmp_path / 'results'),
                     work_root=str(tmp_path / 'work'), use_wandb=False, out=printed, **kwargs)
    return code, printed.lines


def test_slurm_time_spellings():
    assert [time_minutes(t) for t in (90, '90', '30:30', '48:00:00', '2-00', '2-12:30',
                                      '0-00:00:01')] == [90, 90, 31, 2880, 2880, 3630, 1]
    for bad in ('', '1h', '0', '1:2:3:4', True, -5, '2-'):
        with pytest.raises(ValueError):
            time_minutes(bad)


def test_every_suite_key_has_a_parameter():
    assert set(PARAMETERS) == set(SLURM_KEYS)


def test_executor_parameters(tmp_path, stubs):
    """The suite's keys as submitit's AutoExecutor sets them on its SlurmExecutor."""
    slurm = dict(partition='gpu', time='2-00:00:00', mem=64, account='proj', qos='high',
                 constraint='a100', array_parallelism=4, signal_delay_s=300, max_requeues=5,
                 extra=dict(exclusive=True))
    executor = make_executor(tmp_path / '%j', slurm, 4, 'paper', 'suite s')
    assert executor.cluster == 'slurm' and executor._executor.max_num_timeout == 5
    params = executor._executor.parameters
    assert params == dict(job_name='paper', nodes=1, ntasks_per_node=1, time=2880,
                          gpus_per_node=4, cpus_per_task=20, partition='gpu', mem='64G',
                          account='proj', qos='high', constraint='a100', array_parallelism=4,
                          signal_delay_s=300,
                          additional_parameters=dict(requeue=True, exclusive=True))
    # cluster='local': the same keys on submitit's local executor (no GPU here: none shown).
    local = make_executor(tmp_path / 'l' / '%j', dict(cluster='local', time=30), 2, 'x', 'suite s')
    assert type(local._executor) is submitit.LocalExecutor
    assert local._executor.parameters == dict(name='x', nodes=1, tasks_per_node=1, timeout_min=30,
                                              gpus_per_node=0, cpus_per_task=10,
                                              signal_delay_s=120)


@pytest.mark.slow
def test_suite_is_one_array_and_queued_tasks_wait(tmp_path, stubs, monkeypatch):
    path = tmp_path / 'tiny.py'
    path.write_text(SLURM_SUITE)
    suite = expand_suite(str(path), results_root=str(tmp_path / 'results'),
                         work_root=str(tmp_path / 'work'))
    code, out = _run(path, tmp_path, launcher='slurm', partition='gpu')
    assert code == 0
    assert calls(stubs, 'sbatch') == [[str(calls(stubs, 'sbatch')[0][0])]]  # one submission
    folder = tmp_path / 'work/suites/tiny/submitit'
    script = Path(f'{stubs}.script1').read_text()
    flags = [line for line in script.splitlines() if line.startswith('#SBATCH')]
    assert flags == [
        '#SBATCH --account=proj', '#SBATCH --array=0-1%1', '#SBATCH --constraint=a100',
        '#SBATCH --cpus-per-task=6', f'#SBATCH --error={folder}/%A_%a/%A_%a_0_log.err',
        '#SBATCH --gpus-per-node=2', '#SBATCH --job-name=tiny', '#SBATCH --mail-type=END',
        '#SBATCH --mem=32G', '#SBATCH --nodes=1', '#SBATCH --ntasks-per-node=1',
        '#SBATCH --open-mode=append', f'#SBATCH --output={folder}/%A_%a/%A_%a_0_log.out',
        '#SBATCH --partition=gpu', '#SBATCH --qos=high', '#SBATCH --requeue',
        '#SBATCH --signal=USR2@120', '#SBATCH --time=60', '#SBATCH --wckey=submitit']
    assert script.rstrip().endswith(f'{sys.executable} -u -m submitit.core._submit {folder}/%j')
    works = [Path(run.work_dir) for run in suite.runs]
    assert [(w / SLURM_JOB_FILE).read_text() for w in works] == ['4241_0\n', '4241_1\n']
    code = folder / 'code' / snapshot_name()  # the code the tasks run: a copy of the checkout's
    assert out[1] == (f'submitted 2 task(s) to SLURM through submitit (job 4241); its files in '
                      f'{folder}; its code: {code}')
    assert json.loads((code / 'SOURCE.json').read_text())['git'] == git_state()
    assert (code / 'tools/dist_train.sh').read_bytes() == (ROOT / 'tools/dist_train.sh').read_bytes()
    assert out[2] == (f'[1/2] mocov2_r18_digits-s0: submitted as task 4241_0 (start); '
                      f'log {folder}/4241_0/4241_0_0_log.out')
    board = (Path(suite.results_dir) / 'leaderboard.md').read_text()
    assert '| queued |' in board and 'SLURM job 4241_0' in board

    # Each task's pickle: the run's training (--resume: a requeued task continues), then its
    # evaluation, as the runner builds them.
    runner = SuiteRunner(suite, launcher='slurm', partition='gpu')
    fresh = plan_suite(suite, [], queued=lambda work, name: None)
    for index, plan in enumerate(fresh):
        task = submitit.helpers.DelayedSubmission.load(
            folder / f'4241_{index}' / f'4241_{index}_submitted.pkl').function
        assert isinstance(task, RunTask) and task.done == []
        assert task.train.cmd == in_snapshot(runner.train_command(plan), code)
        assert '--resume' in task.train.cmd
        assert task.train.cmd[:4] == ['bash', str(code / 'tools/dist_train.sh'),
                                      str(code / f'configs/{plan.run.name[:-3]}.py'), '2']
        assert [(s.name, s.cmd) for s in task.evals] == [('linear_paper', in_snapshot(
            runner.eval_command(plan.run, suite.evaluations[1], sys.executable), code))]
        assert task.train.log == str(works[index] / 'suite_train.log')

    # Queued or running: nothing submitted again; squeue is asked about each task.
    monkeypatch.setenv('SQUEUE_STATE', 'RUNNING')
    code, out = _run(path, tmp_path, launcher='slurm', partition='gpu')
    assert code == 0 and len(calls(stubs, 'sbatch')) == 1
    assert out[1] == '[1/2] mocov2_r18_digits-s0: queued (SLURM job 4241_0)'
    assert calls(stubs, 'squeue')[-1] == ['-h', '-j', '4241_1', '-o', '%T']

    # The array ended: run 0 has its training record, so its task only evaluates; one task
    # is a plain job (no --array).
    monkeypatch.delenv('SQUEUE_STATE')
    run = suite.runs[0]
    rec = build_record(method='mocov2', backbone='resnet18', pretrain_data='digits',
                       pretrain_epochs=30, eval_data='digits', seed=0, world_size=2,
                       total_batch=64, protocols={p: {'metrics': {'top1': 1.0}}
                                                  for p in DEFAULT_PROTOCOLS})
    write_record(dict(rec, config_sha256=run.config_sha256), suite.results_dir)
    code, out = _run(path, tmp_path, launcher='slurm', partition='gpu', only='mocov2')
    assert len(calls(stubs, 'sbatch')) == 2 and '#SBATCH --array' not in Path(
        f'{stubs}.script2').read_text()
    assert out[2] == (f'[1/1] mocov2_r18_digits-s0: submitted as task 4242 (evaluations); '
                      f'log {folder}/4242/4242_0_log.out')
    task = submitit.helpers.DelayedSubmission.load(folder / '4242/4242_submitted.pkl').function
    assert task.train is None and [s.name for s in task.evals] == ['linear_paper']
    assert (works[0] / SLURM_JOB_FILE).read_text() == '4242\n'


@pytest.mark.parametrize('slurm, message', [
    ("dict(time='1:00:00', partion='gpu')", "unknown key 'partion' (did you mean 'partition'?)"),
    ("dict(cpus_per_task=5)", "slurm.time is missing: each task's time limit"),
    ("dict(time='1 day')", "slurm.time '1 day' is not a SLURM time"),
    ("dict(time=60, gpus_per_node=1)", 'slurm.gpus_per_node must be 2 (one GPU per process'),
    ("dict(time=60, mem='lots')", "slurm.mem must be a size such as '64G'"),
    ("dict(time=60, extra=['--exclusive'])", 'slurm.extra must be a dict of sbatch options'),
    ("dict(time=1, signal_delay_s=60)", 'slurm.signal_delay_s (60 s) must be shorter'),
    ("dict(time=60, array_parallelism=0)", 'slurm.array_parallelism must be an integer >= 1'),
    ("dict(time=60, cluster='pbs')", "slurm.cluster must be 'slurm' or 'local'"),
    ("dict(time=60, max_num_timeout=3)", 'slurm.max_num_timeout is now slurm.max_requeues'),
    ("dict(time=60, max_requeues=-1)", 'slurm.max_requeues must be an integer >= 0'),
    ("dict(time=60, poll_s=0)", 'slurm.poll_s must be a number of seconds from 0.5 to 3600'),
    ("dict(time=60, poll_s='5')", "slurm.poll_s must be a number of seconds from 0.5 to 3600 "
                                  "(how often --wait asks squeue), got '5'"),
])
def test_bad_slurm_keys_fail_in_one_line_before_submitting(tmp_path, stubs, slurm, message):
    path = tmp_path / 'bad.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\nprocs = 2\n"
                    f"slurm = {slurm}\n")
    with pytest.raises(SuiteError, match=None) as err:
        _run(path, tmp_path, launcher='slurm', partition='gpu')
    assert message in str(err.value) and '\n' not in str(err.value)
    assert calls(stubs, 'sbatch') == [] and not (tmp_path / 'work').exists()


def test_wait_looks_at_the_tasks_as_often_as_the_suite_says(tmp_path, stubs, monkeypatch):
    """--wait: slurm.poll_s (default slurm_queue.WAIT_POLL_S) is how often each task is looked at."""
    import benchmark.suites.slurm as slurm_module
    polls = []
    monkeypatch.setattr(slurm_module, 'wait_task',
                        lambda job, poll_s: polls.append(poll_s) or False)  # left the queue
    for poll, text in ((2, ', poll_s=2)'), (slurm_module.WAIT_POLL_S, ')')):
        polls.clear()
        path = tmp_path / f'poll{poll}.py'
        path.write_text(SLURM_SUITE[:-2] + text + '\n')
        code, out = _run(path, tmp_path, launcher='slurm', partition='gpu', wait=True)
        assert code == 1 and polls == [poll, poll], out
        assert out[-2].startswith('summary: 2 run(s): 2 failed'), out


def test_refused_submission_is_one_line_and_fails_the_runs(tmp_path, stubs, monkeypatch):
    monkeypatch.setenv('SBATCH_REFUSES', 'Batch job submission failed: Invalid partition name')
    path = tmp_path / 'tiny.py'
    path.write_text(SLURM_SUITE)
    code, out = _run(path, tmp_path, launcher='slurm', partition='nope')
    assert code == 1
    assert out[1] == ('submission failed: sbatch: error: Batch job submission failed: '
                      'Invalid partition name')
    assert out[2] == 'summary: 2 run(s): 2 failed (failed: mocov2_r18_digits-s0, mixco_r18_digits-s0)'
    assert not list((tmp_path / 'work').glob(f'suites/tiny/*/{SLURM_JOB_FILE}'))


def test_without_srun_the_launcher_says_where_to_submit_from(tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path))  # no srun
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    path = tmp_path / 's.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\nslurm = dict(time=60)\n")
    with pytest.raises(SuiteError, match=r'--launcher slurm: Could not detect "srun".*'
                                         r"slurm=dict\(cluster='local'\)"):
        _run(path, tmp_path, launcher='slurm', partition='gpu')


def test_slurm_needs_a_partition(tmp_path, stubs):
    path = tmp_path / 'tiny.py'
    path.write_text(SLURM_SUITE)
    with pytest.raises(SuiteError, match='--launcher slurm needs a partition'):
        _run(path, tmp_path, launcher='slurm')


# -- a task requeued through submitit's local executor ------------------------------------------

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


def wait_for(condition, what, timeout=120):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f'timed out waiting for {what}'
        time.sleep(0.05)


def fake_training(work: Path) -> list:
    """Saves (a second, noting when it finished) and exits 143 on SIGTERM as
    tools/dist_train.sh does; after a save it finishes."""
    save = "sleep 1; date '+%Y-%m-%d %H:%M:%S.%N' > {work}/saved; exit 143"
    script = (f'trap "{save.format(work=work)}" TERM; '
              f"if [ -e {work}/saved ]; then echo resumed; exit 0; fi; "
              f"echo $$ > {work}/training.pid; while true; do sleep 0.05; done")
    return ['bash', '-c', script]


@pytest.mark.slow
def test_signalled_task_stops_its_training_and_is_requeued(tmp_path, monkeypatch):
    """SLURM may send the pre-emption signal (USR2) to every process of a task: the training
    ignores it, the task sends it SIGTERM (it saves and exits 143), submitit requeues the task,
    which trains again (resuming) and then evaluates, once."""
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    path = tmp_path / 'one.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\n"
                    "evaluations = ['default', 'linear_paper']\nslurm = dict(cluster='local')\n")
    work = tmp_path / 'work/suites/one/mocov2_r18_digits-s0'
    monkeypatch.setattr(SuiteRunner, 'train_command', lambda self, plan: fake_training(work))
    monkeypatch.setattr(SuiteRunner, 'eval_command',
                        lambda self, run, evaluation, python: ['bash', '-c', 'echo evaluated'])
    result = {}
    thread = threading.Thread(target=lambda: result.update(
        zip(('code', 'out'), _run(path, tmp_path, launcher='slurm', partition='any'))))
    thread.start()
    try:
        wait_for(lambda: (work / 'training.pid').exists()  # and written, not only created
                 and (work / 'training.pid').read_text().strip(), 'the training')
        training = int((work / 'training.pid').read_text())
        tasks = task_pids(tmp_path / 'work')
        assert len(tasks) == 1
        for pid in (training, tasks[0]):  # the training first: it must not die of it
            os.kill(pid, signal.SIGUSR2)
            time.sleep(0.2)
    finally:
        thread.join(timeout=300)
    assert not thread.is_alive()
    code, out = result['code'], result['out']
    assert code == 0, out
    assert out[1].startswith('submitted 1 task(s) to this machine through submitit (local jobs)')
    assert out[3] == 'waiting for 1 task(s)'
    assert out[4].startswith('[1/1] mocov2_r18_digits-s0: task ') and out[4].endswith('-> ok (started)')
    train_log = (work / 'suite_train.log').read_text()
    assert train_log.count('\n==== ') == 2 and 'resumed' in train_log
    assert (work / 'suite_eval_linear_paper.log').read_text().splitlines().count('evaluated') == 1
    job_log = ''.join(p.read_text() for p in (tmp_path / 'work/suites/one/submitit').glob('*/*_0_log.*'))
    assert 'Caught signal SIGUSR2' in job_log
    # The task waited for the training's save before submitit requeued it.
    requeued = re.search(r'\((\S+ \S+)\) - Requeued job', job_log).group(1)
    saved = (work / 'saved').read_text().strip()[:26]
    assert (datetime.strptime(saved, '%Y-%m-%d %H:%M:%S.%f')
            < datetime.strptime(requeued, '%Y-%m-%d %H:%M:%S,%f'))
    assert not (work / SLURM_JOB_FILE).exists()  # a local job is not SLURM's to ask about


def test_task_failures(tmp_path):
    """A failed training fails the task (and says where its log is); a failed evaluation is
    named in the task's result while the others run; a diverged training skips them."""
    logs = tmp_path / 'logs'
    steps = lambda code: (Step('train', ['bash', '-c', f'exit {code}'], str(logs / 't.log')),  # noqa: E731
                          [Step('a', ['bash', '-c', 'exit 1'], str(logs / 'a.log')),
                           Step('b', ['true'], str(logs / 'b.log'))])
    with pytest.raises(RuntimeError, match=r'run r: training failed \(exit 7\); log .*t\.log'):
        RunTask('r', *steps(7), sys.executable)()
    said = Step('train', ['bash', '-c', 'echo "error: c.py: a.JPEG: truncated" >&2; exit 2'],
                str(logs / 's.log'))
    with pytest.raises(RuntimeError) as failed:  # the line it ended with, and its code
        RunTask('r', said, [], sys.executable)()
    assert str(failed.value) == (f'run r: training failed (exit 2): error: c.py: a.JPEG: '
                                 f'truncated; log {logs / "s.log"}')
    with pytest.raises(RuntimeError, match='stopped by a signal from outside the task'):
        RunTask('r', *steps(143), sys.executable)()
    task = RunTask('r', *steps(0), sys.executable)
    assert task() == dict(run='r', diverged=False, failed_evals={'a': str(logs / 'a.log')})
    assert task.done == ['train', 'b']
    assert RunTask('r', *steps(3), sys.executable)() == dict(run='r', diverged=True,
                                                              failed_evals={})


def test_run_task_of_a_trained_run_only_evaluates(suite_from_text):
    suite = suite_from_text("configs = ['configs/mocov2_r18_digits.py']\n"
                            "evaluations = ['default', 'linear_paper', 'knn']\n", 's.py')
    plan = plan_suite(suite, [], queued=lambda work, name: None)[0]
    plan.train, plan.evals = 'done', {'linear_paper': 'done', 'knn': 'todo'}
    runner = SuiteRunner(suite, launcher='slurm', partition='gpu')
    task = run_task(runner, plan)
    assert task.train is None and [s.name for s in task.evals] == ['knn']


def test_submitit_private_JobEnvironment_usr_sig(monkeypatch):
    """The signal the task handles at the time limit: SIGUSR2 unless SUBMITIT_PREEMPT_SIGNAL."""
    from submitit.core.job_environment import JobEnvironment
    monkeypatch.delenv('SUBMITIT_PREEMPT_SIGNAL', raising=False)
    assert 'JobEnvironment._usr_sig' in SUBMITIT_PRIVATE_API
    assert JobEnvironment._usr_sig() == signal.SIGUSR2


def test_submitit_private_AutoExecutor_executor(tmp_path):
    """cluster='local': the wrapped LocalExecutor takes signal_delay_s."""
    assert 'AutoExecutor._executor' in SUBMITIT_PRIVATE_API
    executor = submitit.AutoExecutor(folder=str(tmp_path), cluster='local')
    assert isinstance(executor._executor, submitit.LocalExecutor)
    executor._executor.update_parameters(signal_delay_s=7)
    assert executor._executor.parameters['signal_delay_s'] == 7
