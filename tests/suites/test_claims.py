"""Run claims: a run claimed by another live process (or trained by a trainer of its own) is not
claimed, naming the holder; a SIGKILLed claimant blocks nothing; the runner passes a held run
over, comes back to it at the end, waits for it and carries out only what is left. Two real
suite processes at once: the restart of tests/e2e/test_suite_e2e.py."""
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import benchmark.components  # noqa: F401
from benchmark.engine.work_dir_lock import TRAINER_LOCK, FileLock
from benchmark.suites.claim import CLAIM_FILE, RunClaim
from benchmark.suites.plan import RunPlan
from benchmark.suites.runner import SuiteRunner
from benchmark.suites.status import StatusLines
from benchmark.suites.suite import run_suite

# Holds a claim (or, with 'trainer', a trainer lock) until its stdin closes or FILE appears.
HOLD = """
import os, sys, time
from benchmark.engine.work_dir_lock import hold_work_dir
from benchmark.suites.claim import RunClaim
work_dir, what, until = sys.argv[1:4]
assert (hold_work_dir(work_dir) if what == 'trainer' else RunClaim(work_dir).take() is None)
print('held', flush=True)
while not os.path.exists(until):
    time.sleep(0.05)
"""
HELD_BY = re.compile(r'claimed by another suite process \(pid (\d+) on host \S+ since [^)]+\)')


@pytest.fixture
def holder(subprocess_env, tmp_path):
    """holder(work_dir, what='claim') -> a live process holding the run's claim (or its
    trainer lock) until the file it returns as `.release` exists."""
    procs = []

    def start(work_dir, what='claim'):
        release = tmp_path / f'release-{len(procs)}'
        proc = subprocess.Popen([sys.executable, '-c', HOLD, str(work_dir), what, str(release)],
                                env=subprocess_env, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == 'held'
        proc.release = release
        return proc
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_run_claimed_by_another_process_is_refused_naming_it(tmp_path, holder):
    proc = holder(tmp_path)
    held = RunClaim(str(tmp_path)).take()
    assert HELD_BY.fullmatch(held) and HELD_BY.fullmatch(held).group(1) == str(proc.pid), held
    assert not RunClaim(str(tmp_path)).try_take()


def test_a_sigkilled_claimant_blocks_nothing(tmp_path, holder):
    proc = holder(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    claim = RunClaim(str(tmp_path))
    assert claim.take() is None
    try:
        assert (tmp_path / CLAIM_FILE).is_file() and claim.lock.held
    finally:
        claim.give_up()


def test_a_run_being_trained_outside_a_suite_is_not_claimed(tmp_path, holder):
    """A trainer started by hand holds the work dir: the run is not claimed (and the claim
    file is left free for whoever comes next)."""
    proc = holder(tmp_path, 'trainer')
    held = RunClaim(str(tmp_path)).take()
    assert held.startswith(f'being trained by pid {proc.pid} on host '), held
    assert FileLock(str(tmp_path / CLAIM_FILE)).probe() is None
    assert FileLock(str(tmp_path / TRAINER_LOCK)).probe() is not None


def test_the_suites_own_claim_does_not_stop_its_trainer(tmp_path):
    """The claim and the trainer lock are two files: the suite holds one, its child the other."""
    from benchmark.engine.work_dir_lock import check_work_dir_free
    claim = RunClaim(str(tmp_path))
    assert claim.take() is None
    try:
        check_work_dir_free(str(tmp_path))  # what the trainer's --check-only probes
    finally:
        claim.give_up()


ONE = "configs = ['configs/mocov2_r18_digits.py']\nseeds = [0]\n"


def _runner(suite_from_text, name):
    """A runner of a one-run suite, its run, and the list its lines go to."""
    lines = []
    runner = SuiteRunner(suite_from_text(ONE, name), out=lines.append)
    return runner, runner.suite.runs[0], lines


@pytest.mark.slow
def test_a_held_run_is_passed_over_then_waited_for_then_planned_again(suite_from_text, holder,
                                                                       monkeypatch):
    """Passed over (back to the end of the queue), then, the queue back at it, waited for while
    the runner looks at its slots; once the other process lets go, planned again under the
    claim and carried out as planned then."""
    runner, run, lines = _runner(suite_from_text, 'held.py')
    proc = holder(run.work_dir)
    monkeypatch.setattr(runner, 'replan', lambda plan: RunPlan(  # what the other process left
        plan.run, 'resume', checkpoint='epoch_1.pth'))
    trained = []
    monkeypatch.setattr(runner, 'train_command',
                        lambda plan: trained.append(plan.train) or ['true'])
    waits = []

    def the_other_finishes(running, pending):  # after a few looks at the slots
        waits.append(1)
        if len(waits) == 3:
            proc.release.touch()
            proc.wait()
    monkeypatch.setattr(runner.status, 'show', the_other_finishes)
    (outcome,) = runner.run([RunPlan(run, 'start')])
    assert HELD_BY.search(lines[0]).group(1) == str(proc.pid), lines
    assert lines[0].startswith(f'[1/1] {run.name}: claimed by another suite process (pid ')
    assert lines[0].endswith('; coming back to it at the end')
    assert lines[1].endswith('; waiting for it') and HELD_BY.search(lines[1])
    assert lines[2].startswith(f'[1/1] {run.name}: resumed from epoch_1.pth; log ')
    assert len(waits) >= 3 and trained == ['resume'] and outcome.state == 'resumed'
    assert FileLock(str(Path(run.work_dir) / CLAIM_FILE)).probe() is None  # given up afterwards


@pytest.mark.slow
def test_a_wait_ends_when_the_suite_is_interrupted(suite_from_text, holder, monkeypatch):
    runner, run, lines = _runner(suite_from_text, 'stop.py')
    holder(run.work_dir)
    runner.passed.add(1)  # the second visit
    monkeypatch.setattr(runner.status, 'show', lambda running, pending: setattr(
        runner, 'interrupted', signal.SIGTERM))
    (outcome,) = runner.run([RunPlan(run, 'start')])
    assert outcome.state == 'interrupted' and not outcome.ok
    assert len(lines) == 1 and lines[0].endswith('; waiting for it')


def test_a_run_without_work_is_not_claimed(suite_from_text):
    runner, run, lines = _runner(suite_from_text, 'done.py')
    (outcome,) = runner.run([RunPlan(run, 'done')])
    assert outcome.state == 'done' and lines == [f'[1/1] {run.name}: done (records exist)']
    assert not (Path(run.work_dir) / CLAIM_FILE).exists()


def test_the_runner_passes_over_a_claimed_run_and_ends_with_it_done(tmp_path, monkeypatch,
                                                                   holder):
    """Two runs; another process holds the first one's claim and 'finishes' it while this suite
    trains the second: the suite trains only the second and reports the first as done."""
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    path = tmp_path / 'pair.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 1]\n")
    first = tmp_path / 'work/suites/pair/mocov2_r18_digits-s0'
    proc = holder(first)
    trained = []

    def train_command(self, plan):
        trained.append(plan.run.name)
        return ['bash', '-c', f'touch {proc.release}; exit 0']  # the other finishes meanwhile
    replan = SuiteRunner.replan

    def replan_done(self, plan):  # the other process's records, once it has finished
        if plan.run.name.endswith('-s0'):
            return RunPlan(plan.run, 'done')
        return replan(self, plan)
    monkeypatch.setattr(SuiteRunner, 'train_command', train_command)
    monkeypatch.setattr(SuiteRunner, 'replan', replan_done)
    ended = []  # the suite's count and ETA line: after a run that did work, not a pass-over
    run_ended = StatusLines.run_ended
    monkeypatch.setattr(StatusLines, 'run_ended', lambda self, finished, running, pending: (
        ended.append(len(pending)) or run_ended(self, finished, running, pending)))
    lines = []
    code = run_suite(str(path), results_root=str(tmp_path / 'results'),
                     work_root=str(tmp_path / 'work'), use_wandb=False,
                     out=lambda *a, **k: lines.append(' '.join(map(str, a))))
    assert trained == ['mocov2_r18_digits-s1']
    assert lines[1] == (f'[1/2] mocov2_r18_digits-s0: claimed by another suite process (pid '
                        f'{proc.pid} on host {os.uname().nodename} since '
                        + lines[1].split(' since ')[1])
    assert lines[1].endswith('; coming back to it at the end')
    assert '[1/2] mocov2_r18_digits-s0: done (records exist)' in lines
    assert lines.index('[1/2] mocov2_r18_digits-s0: done (records exist)') > \
        max(i for i, line in enumerate(lines) if 'mocov2_r18_digits-s1' in line)
    summary = next(line for line in lines if line.startswith('summary: '))
    assert summary == 'summary: 2 run(s): 1 done before, 1 started', lines
    assert ended == [1]  # once: after the second run, the first still to come back to
    assert code == 0
