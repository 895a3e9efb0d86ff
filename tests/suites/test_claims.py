"""Run claims: a run claimed by another live process (or trained by a trainer of its own) is not
claimed, naming the holder; a SIGKILLed claimant blocks nothing; the runner passes a held run
over, comes back to it at the end, waits for it and carries out only what is left. Two real
suite processes at once: tests/e2e/test_concurrent_suites.py."""
import os
import re
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

import benchmark.components  # noqa: F401
from benchmark.engine.work_dir_lock import TRAINER_LOCK, FileLock
from benchmark.suites.claim import CLAIM_FILE, PASSED_OVER, RunClaim, RunClaims
from benchmark.suites.outcome import Outcome
from benchmark.suites.plan import RunPlan
from benchmark.suites.runner import SuiteRunner
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


def _plan(work_dir, train='start'):
    return RunPlan(SimpleNamespace(work_dir=str(work_dir), name='r'), train)


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


class Carried:
    """A run's generator as the runner's: yields `steps` times, then the plan's outcome."""

    def __init__(self, steps=2):
        self.plans, self.steps = [], steps

    def __call__(self, plan):
        self.plans.append(plan)
        for _ in range(self.steps):
            yield
        return Outcome(plan.run, 'started')


def _drive(gen, each_step=lambda: None):
    """Step a generator to its end; its return value."""
    try:
        while True:
            next(gen)
            each_step()
    except StopIteration as stop:
        return stop.value


def test_a_held_run_is_passed_over_then_waited_for_then_planned_again(tmp_path, holder):
    proc = holder(tmp_path)
    lines, queue, carried = [], [], Carried()
    claims = RunClaims(None, lines.append, requeue=queue.append)
    claims.replan = lambda plan: _plan(tmp_path, 'resume')  # what the other process left
    plan = _plan(tmp_path)
    first = _drive(claims.run(1, 2, plan, carried))
    assert first.state == PASSED_OVER and queue == [(1, plan)] and carried.plans == []
    assert lines[0].startswith('[1/2] r: claimed by another suite process (pid ')
    assert lines[0].endswith('; coming back to it at the end')
    waits = []

    def the_other_finishes():  # after a few steps of waiting
        waits.append(1)
        if len(waits) == 3:
            proc.release.touch()
            proc.wait()
    second = _drive(claims.run(1, 2, plan, carried), the_other_finishes)
    assert lines[1].endswith('; waiting for it') and len(lines) == 2
    assert len(waits) >= 3 + carried.steps and second.state == 'started'
    assert [p.train for p in carried.plans] == ['resume']  # planned again under the claim
    assert FileLock(str(tmp_path / CLAIM_FILE)).probe() is None  # given up afterwards


def test_a_wait_ends_when_the_suite_is_interrupted(tmp_path, holder):
    holder(tmp_path)
    stopped = []
    claims = RunClaims(None, print, requeue=lambda item: None, stop=lambda: bool(stopped))
    claims.passed.add(1)  # the second visit
    outcome = _drive(claims.run(1, 1, _plan(tmp_path), Carried()), lambda: stopped.append(1))
    assert outcome.state == 'interrupted' and not outcome.ok


def test_a_run_without_work_is_not_claimed(tmp_path):
    carried = Carried(steps=0)
    outcome = _drive(RunClaims(None, print, requeue=None).run(1, 1, _plan(tmp_path, 'done'),
                                                               carried))
    assert outcome.state == 'started' and carried.plans[0].train == 'done'
    assert not (tmp_path / CLAIM_FILE).exists()


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
    replan = RunClaims.replan

    def replan_done(self, plan):  # the other process's records, once it has finished
        if plan.run.name.endswith('-s0'):
            return RunPlan(plan.run, 'done')
        return replan(self, plan)
    monkeypatch.setattr(SuiteRunner, 'train_command', train_command)
    monkeypatch.setattr(RunClaims, 'replan', replan_done)
    ended = []  # the suite's count and ETA line: after a run that did work, not a pass-over
    run_ended = SuiteRunner._run_ended
    monkeypatch.setattr(SuiteRunner, '_run_ended',
                        lambda self: ended.append(len(self.pending)) or run_ended(self))
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
