"""End to end on a real SLURM (tools/slurm_cluster.sh; marked `slurm`, skipped saying why when
none answers): a one-run suite submitted with ``--launcher slurm`` goes through sbatch as a job
array. In the middle of its training the job gets SLURM's time-limit warning (USR2, sent with
``scancel --signal``, as SLURM sends it ``signal_delay_s`` before the limit): the task stops the
training, which saves and exits 143, submitit requeues the job through ``scontrol requeue``,
SLURM starts it again, the training resumes and ends with the weights of the uninterrupted run
(tests/e2e/conftest.py's, one process), bit for bit, and the run has exactly one record.
The run pauses at iteration 11 (epoch 2) until the signal has arrived, on any machine. The
suites' --wait looks at their tasks every second (slurm.poll_s=1; 5 s by default).
Without a suite: docs/crash-safety.md's batch script, USR1 to its shell, requeued by the
script, resumed bit for bit."""
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import benchmark.components  # noqa: F401
from benchmark.harness.faults.runs import differing, load_weights
from benchmark.suites.spec import expand_suite
from tests.conftest import ROOT
from tests.e2e.conftest import EPOCHS, STEPS, paused_config, run_env, wait_for
from tools import run_suite

pytestmark = pytest.mark.slurm

AT = 11  # epoch 2, batch 3 of 8
SUITE = """
configs = [{config!r}]
seeds = [0]
procs = 1
slurm = dict(partition='debug', time='0:30:00', gpus_per_node=0, cpus_per_task=1, poll_s=1)
"""


def queued(name: str) -> list:
    """The ids of the queued or running jobs named `name`, one per array task (squeue)."""
    out = subprocess.run(['squeue', '-h', '-r', '-n', name, '-o', '%i'], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return out.split()


def start_paused(folder: Path, tiny_data, monkeypatch):
    """Submit the one-run suite (its run pausing at iteration AT) from `folder`, named for this
    submission alone (tests running at once each see their own job): its name, its process, the
    run's work dir and the pause's flag prefix."""
    folder.mkdir(exist_ok=True)
    config, flag = paused_config(folder, tiny_data, AT)
    monkeypatch.syspath_prepend(str(folder))  # expand_suite checks the config's imports
    name = f'realslurm_{uuid.uuid4().hex[:8]}'
    suite_file = folder / f'{name}.py'
    suite_file.write_text(SUITE.format(config=config))
    env = dict(run_env(folder, folder), PYTHON=sys.executable)
    cmd = [sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite_file), '--no-wandb',
           '--launcher', 'slurm', '--wait']
    run = expand_suite(str(suite_file), work_root=str(folder / 'work_dirs')).runs[0]
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return name, proc, Path(run.work_dir), flag


def paused_job(name, proc, flag) -> str:
    """The job id once the run is at AT (the suite's process killed if it never gets there)."""
    try:
        wait_for(lambda: os.path.exists(f'{flag}.0'), 900, f'iteration {AT} of the run', proc)
        jobs = queued(name)
        assert len(jobs) == 1, jobs
    except BaseException:
        proc.kill()
        raise
    return jobs[0]


def submit_paused(tmp_path, tiny_data, monkeypatch):
    """`start_paused` and `paused_job`: name, process, work dir and job id."""
    name, proc, work, flag = start_paused(tmp_path, tiny_data, monkeypatch)
    return name, proc, work, paused_job(name, proc, flag)


def finish(name, proc) -> str:
    """What the suite printed, once it has ended (its jobs cancelled if it has not)."""
    try:
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        for job in queued(name):
            subprocess.run(['scancel', job], timeout=30)
    return out


# `scontrol requeue` (PreemptMode=REQUEUE) is the two-node test's stop (test_slurm_two_nodes.py).
STOPS = {'time-limit-warning': ['scancel', '--signal=USR2']}


def test_stopped_jobs_save_are_requeued_and_resume_bit_identical(
        real_slurm, tmp_path, tiny_data, reference_1p, monkeypatch):
    """USR2, as SLURM sends it `signal_delay_s` before the time limit: submitit checkpoints the
    task and requeues the job."""
    started = {kind: start_paused(tmp_path / kind, tiny_data, monkeypatch) for kind in STOPS}
    outs = {}
    try:
        jobs = {kind: paused_job(name, proc, flag)
                for kind, (name, proc, _, flag) in started.items()}
        for kind, stop in STOPS.items():
            subprocess.run([*stop, jobs[kind]], check=True, timeout=30)
        for kind, (name, proc, _, _) in started.items():
            outs[kind] = finish(name, proc)
    finally:
        for name, proc, _, _ in started.values():
            if proc.poll() is None:
                finish(name, proc)
    for kind, (name, proc, work, _) in started.items():
        assert proc.returncode == 0, (kind, outs[kind][-3000:])
        train_log = (work / 'suite_train.log').read_text()
        assert train_log.count('\n==== ') == 2 and 'exiting with 143' in train_log, (
            kind, train_log[-3000:])
        assert f'iter_{AT}.pth after iteration {AT}' in train_log, (kind, train_log[-3000:])
        assert f'resumed epoch: {AT // STEPS[1]}, iter: {AT}' in train_log, kind
        job_logs = ''.join(p.read_text() for p in (work.parent / 'submitit').glob('*/*_log.*'))
        assert 'Caught signal SIGUSR2' in job_logs and 'Requeued job' in job_logs
        runs = tmp_path / kind / f'results/suites/{name}/runs'
        assert len(list(runs.glob('*.json'))) == 1, kind
        final = load_weights(str(work / f'epoch_{EPOCHS}.pth'))
        assert differing(reference_1p.weights, final) == [], kind


@pytest.fixture
def linuxproc(real_slurm_linuxproc):
    """The cluster that tracks a job's processes by their parents (SLURM_CONF set to it),
    checked to be it."""
    out = subprocess.run(['scontrol', 'show', 'config'], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    assert re.search(r'^ProctrackType\s*=\s*proctrack/linuxproc$', out, re.M), out


def test_a_cancelled_job_saves_and_says_how_to_resume(linuxproc, tmp_path, tiny_data,
                                                     monkeypatch):
    """scancel under linuxproc tracking: SIGTERM reaches every process of the job at once, the
    training included. The training saves at the signal and the suite says the run was
    stopped; rerunning it resumes (as above). (Under cgroup tracking SIGTERM reaches the task
    only, which passes it on: `scontrol requeue` in test_slurm_two_nodes.py.)"""
    name, proc, work, job = submit_paused(tmp_path, tiny_data, monkeypatch)
    subprocess.run(['scancel', job], check=True, timeout=30)
    out = finish(name, proc)
    train_log = (work / 'suite_train.log').read_text()
    assert f'iter_{AT}.pth after iteration {AT}' in train_log, train_log[-3000:]
    assert (work / f'iter_{AT}.pth').exists()
    assert 'stopped by SIGTERM' in out and 'rerun the suite to resume it' in out, out[-3000:]


def test_two_launches_at_once_submit_each_run_once(real_slurm, tmp_path, run_main, monkeypatch):
    """Two launches of a two-run suite started together, with a controller slow to answer
    sbatch (a wrapper waits 2 s before the real one): two tasks in SLURM, one per run, each
    run's job id recorded; a third launch finds both queued and submits nothing. The jobs are
    held (sbatch --hold), so nothing trains. The third launch runs in-process."""
    name = f'realslurm_{uuid.uuid4().hex[:8]}'
    suite_file = tmp_path / f'{name}.py'
    suite_file.write_text(
        "configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 1]\nprocs = 1\n"
        "slurm = dict(partition='debug', time='0:30:00', gpus_per_node=0, cpus_per_task=1, "
        "extra=dict(hold=True))\n")
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    sbatch = subprocess.run(['bash', '-c', 'command -v sbatch'], capture_output=True, text=True,
                            check=True).stdout.strip()
    (bin_dir / 'sbatch').write_text(f'#!/bin/bash\necho "$$" >> {tmp_path}/sbatch.calls\n'
                                    f'sleep 2\nexec {sbatch} "$@"\n')
    (bin_dir / 'sbatch').chmod(0o755)
    env = dict(run_env(tmp_path, tmp_path), PYTHON=sys.executable,
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cmd = [sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite_file), '--no-wandb',
           '--launcher', 'slurm']
    try:
        launches = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True) for _ in range(2)]
        outs = [proc.communicate(timeout=300)[0] for proc in launches]
        assert [proc.returncode for proc in launches] == [0, 0], outs
        tasks = queued(name)
        assert len(tasks) == 2, (tasks, outs)
        works = sorted((tmp_path / f'work_dirs/suites/{name}').glob('mocov2_r18_digits-s*'))
        recorded = sorted((w / 'slurm_job_id').read_text().strip() for w in works)
        assert recorded == sorted(tasks), (recorded, tasks, outs)
        assert not list(tmp_path.glob('work_dirs/suites/*/*/slurm_submitting'))
        monkeypatch.chdir(tmp_path)  # in-process: the launch's process is proven above
        monkeypatch.setenv('PATH', env['PATH'])
        code, third, err, _ = run_main(run_suite, *cmd[2:])
        assert code == 0 and third.count(': queued (SLURM job ') == 2, third + err
        assert len((tmp_path / 'sbatch.calls').read_text().split()) in (1, 2)
    finally:
        for job in queued(name):
            subprocess.run(['scancel', job], timeout=30)


def test_wait_ends_for_a_job_cancelled_before_it_ran(real_slurm, tmp_path):
    """--wait on a cluster without accounting (sacct knows no job): a task cancelled while
    pending never writes a result; the launch says so and ends instead of waiting forever."""
    name = f'realslurm_{uuid.uuid4().hex[:8]}'
    suite_file = tmp_path / f'{name}.py'
    suite_file.write_text(
        "configs = ['configs/mocov2_r18_digits.py']\nseeds = [0]\nprocs = 1\n"
        "slurm = dict(partition='debug', time='0:30:00', gpus_per_node=0, cpus_per_task=1, "
        "poll_s=1, extra=dict(hold=True))\n")
    env = dict(run_env(tmp_path, tmp_path), PYTHON=sys.executable)
    proc = subprocess.Popen([sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite_file),
                             '--no-wandb', '--launcher', 'slurm', '--wait'], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: queued(name), 300, 'the held job', proc)
        subprocess.run(['scancel', *queued(name)], check=True, timeout=30)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        for job in queued(name):
            subprocess.run(['scancel', job], timeout=30)
    assert proc.returncode == 1, out
    assert 'left the queue without a result (cancelled, or killed before it wrote one)' in out


def documented_batch_script(config: str, work: Path) -> str:
    """docs/crash-safety.md's SLURM batch script for `config` in `work`: its lines as the page
    prints them, but for the command's config, work dir and one process (no GPUs here: this
    SLURM has none, and one process keeps the test short; the script's part is the same)."""
    page = (ROOT / 'docs/crash-safety.md').read_text()
    script = next(block for block in re.findall(r'```bash\n(.*?)```', page, re.S)
                  if '#SBATCH --requeue' in block)
    command = 'tools/dist_train.sh configs/mixco_r18_tiny.py 2 --resume &'
    assert command in script and ' --gres=gpu:2' in script, script
    return script.replace(' --gres=gpu:2', '').replace(
        command, f'tools/dist_train.sh {config} 1 --resume --work-dir {work} --no-eval &')


def job_state(job: str) -> dict:
    """scontrol's JobState and Restarts of `job`."""
    out = subprocess.run(['scontrol', 'show', 'job', job], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return dict(re.findall(r'\b(JobState|Restarts)=(\S+)', out))


ENDED = ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY')


def until(condition, job: str, what: str, log: Path) -> None:
    """Wait for `condition(state)` of the job's `job_state` (10 minutes at most); fail at once,
    with the job's output, when the job has ended without it."""
    def held() -> bool:
        state = job_state(job)  # read once: the condition and the check see the same state
        if condition(state):
            return True
        assert state['JobState'] not in ENDED, (what, state, read(log)[-3000:])
        return False
    wait_for(held, 600, what)


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ''


def test_the_documented_batch_script_requeues_its_stopped_run_which_resumes_bit_identical(
        real_slurm, tmp_path, tiny_data, reference_1p):
    """The page's batch script on a real SLURM: USR1 to the batch shell (as --signal=B:USR1@120
    sends it before the time limit; here `scancel --batch --signal=USR1` in the middle of epoch
    2) is passed to dist_train.sh, whose training process saves and exits 143; the script
    requeues the job, SLURM starts it again, and its --resume ends with the uninterrupted run's
    weights."""
    at = 11  # epoch 2, batch 3 of 8
    config, flag = paused_config(tmp_path, tiny_data, at)
    work, out = tmp_path / 'work', tmp_path / 'job.out'
    (tmp_path / 'job.sh').write_text(documented_batch_script(config, work))
    env = dict(run_env(tmp_path, tmp_path), PYTHON=sys.executable)
    job = subprocess.run(['sbatch', '--parsable', '-J', f'script_{uuid.uuid4().hex[:8]}',
                          '-c', '2', '--open-mode=append', '-o', str(out), '-D', str(ROOT),
                          str(tmp_path / 'job.sh')],
                         env=env, capture_output=True, text=True, timeout=30, check=True
                         ).stdout.strip()
    try:
        until(lambda _: os.path.exists(f'{flag}.0'), job,
              f'iteration {at} of the job', out)
        subprocess.run(['scancel', '--batch', '--signal=USR1', job], check=True, timeout=30)
        until(lambda state: state == {'JobState': 'COMPLETED', 'Restarts': '1'}, job,
              'the requeued job completing', out)
    finally:
        if job_state(job)['JobState'] not in ENDED:
            subprocess.run(['scancel', job], timeout=30)
    log = read(out)
    assert log.count('exiting with 143') == 1 and f'iter_{at}.pth after iteration {at}' in log, \
        log[-3000:]
    assert f'resumed epoch: {at // STEPS[1]}, iter: {at}' in log, log[-3000:]
    final = load_weights(str(work / f'epoch_{EPOCHS}.pth'))
    assert differing(reference_1p.weights, final) == []
