"""One suite process per run: a run is claimed before it starts.

Two suite processes on the same suite and roots (two terminals, a rerun while the first still
trains, SLURM array tasks that each run the suite) share its runs instead of training each twice.
A process claims a run before it starts it: an exclusive lock on ``<work dir>/suite_claim.lock``
(``flock``: the kernel releases it when the claimant ends, however it ends, so a killed suite
blocks nothing), holding its pid, host and start time. Under the claim the run is planned again
from the records on disk then (the other process may have finished it meanwhile), carried out,
and the claim is given up.

A run claimed by another suite process, or being trained by a trainer started by hand (its
work dir's trainer lock, `benchmark.engine.work_dir_lock`), is passed over: put back at the end
of the queue. When the queue comes back to it, the suite waits for it (stepping its other runs
meanwhile), plans it again and finds it done (its records exist), or carries out what is left
(the other process stopped before the end). So every run is trained once and ends with one
record per evaluation.

The claim is not the trainer's lock: the suite holding a run's claim never makes its own trainer
(which takes the trainer lock) refuse.

`RunClaims.run` wraps the runner's generator of one run::

    claims = RunClaims(suite, out, requeue=pending.append, stop=lambda: interrupted)
    step(slot, index, claims.run(index, total, plan, partial(run_local, index, slot=slot)))
"""
from __future__ import annotations

import os.path as osp
from typing import Callable, Generator, Optional, Set, Tuple

from benchmark.engine.work_dir_lock import FileLock, LocksUnsupported, lock_path
from benchmark.suites.outcome import Outcome
from benchmark.suites.plan import RunPlan, index_records, plan_run
from benchmark.suites.report import read_suite_records
from benchmark.suites.spec import Suite

CLAIM_FILE = 'suite_claim.lock'  # in a run's work dir: held by the suite process carrying it out
PASSED_OVER = 'passed over'  # the state of a run's outcome until the suite comes back to it
CarryOut = Callable[[RunPlan], Generator[None, None, Outcome]]


class RunClaim:
    """This process's claim of one run (always granted where the file system has no locks)."""

    def __init__(self, work_dir: str) -> None:
        self.lock = FileLock(osp.join(work_dir, CLAIM_FILE))
        self.trainer = FileLock(lock_path(work_dir))

    def take(self) -> Optional[str]:
        """Claim the run: None when it is ours now, else who has it ('claimed by another suite
        process (pid N on host H since T)', or 'being trained by pid N ...' for a trainer
        started outside any suite)."""
        try:
            if not self.lock.try_acquire():
                return f'claimed by another suite process ({self.lock.holder().describe()})'
            holder = self.trainer.probe()
        except LocksUnsupported:
            return None
        if holder is None:
            return None
        self.lock.release()
        return f'being trained by {holder.describe()}'

    def try_take(self) -> bool:
        """`take` without naming the holder (cheap enough for every step of a wait)."""
        try:
            if not self.lock.try_acquire():
                return False
            if self.trainer.probe() is None:
                return True
        except LocksUnsupported:
            return True
        self.lock.release()
        return False

    def give_up(self) -> None:
        self.lock.release()


class RunClaims:
    """The claims of one suite invocation.

    Args:
        suite: The expanded suite (its records are read again under each claim).
        out: Where progress lines go.
        requeue: Puts an ``(index, plan)`` back at the end of the runner's queue.
        stop: True once the suite is interrupted (a wait ends then).
    """

    def __init__(self, suite: Suite, out: Callable[..., None],
                 requeue: Callable[[Tuple[int, RunPlan]], None],
                 stop: Callable[[], bool] = lambda: False) -> None:
        self.suite, self.out, self.requeue, self.stop = suite, out, requeue, stop
        self.passed: Set[int] = set()  # indices passed over once

    def replan(self, plan: RunPlan) -> RunPlan:
        """The run's plan from the records on disk now."""
        records = index_records(read_suite_records(self.suite.record_dirs))
        return plan_run(plan.run, self.suite, records)

    def run(self, index: int, total: int, plan: RunPlan,
            carry_out: CarryOut) -> Generator[None, None, Outcome]:
        """Carry out ``plan`` under its claim, planned again: ``carry_out(plan)``'s outcome.

        A run another process holds is put back in the queue the first time (its outcome says
        `PASSED_OVER` until then); the second time, this waits for it, yielding.
        """
        if not plan.has_work:  # done, diverged or queued: nothing to claim
            return (yield from carry_out(plan))
        prefix = f'[{index}/{total}] {plan.run.name}:'
        claim = RunClaim(plan.run.work_dir)
        holder = claim.take()
        if holder is not None:
            if index not in self.passed:
                self.passed.add(index)
                self.out(f'{prefix} {holder}; coming back to it at the end')
                self.requeue((index, plan))
                return Outcome(plan.run, PASSED_OVER)
            self.out(f'{prefix} {holder}; waiting for it')
            while not claim.try_take():
                if self.stop():
                    return Outcome(plan.run, 'interrupted', ok=False)
                yield
        try:
            return (yield from carry_out(self.replan(plan)))
        finally:
            claim.give_up()
