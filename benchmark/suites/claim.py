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
of the queue. When the queue comes back to it, the suite waits for it (its other runs go on
meanwhile), plans it again and finds it done (its records exist), or carries out what is left
(the other process stopped before the end). So every run is trained once and ends with one
record per evaluation. The runner does this (`benchmark.suites.runner.SuiteRunner.begin`).

The claim is not the trainer's lock: the suite holding a run's claim never makes its own trainer
(which takes the trainer lock) refuse.
"""
from __future__ import annotations

import os.path as osp
from typing import Optional

from benchmark.engine.work_dir_lock import Lock, lock_path

CLAIM_FILE = 'suite_claim.lock'  # in a run's work dir: held by the suite process carrying it out
PASSED_OVER = 'passed over'  # the state of a run's outcome until the suite comes back to it


class RunClaim:
    """This process's claim of one run (flock, or a lease where flock does not hold across
    machines: `benchmark.engine.work_dir_lock.Lock`)."""

    def __init__(self, work_dir: str) -> None:
        self.lock = Lock(osp.join(work_dir, CLAIM_FILE))
        self.trainer = Lock(lock_path(work_dir))

    def take(self) -> Optional[str]:
        """Claim the run: None when it is ours now, else who has it ('claimed by another suite
        process (pid N on host H since T)', or 'being trained by pid N ...' for a trainer
        started outside any suite)."""
        if not self.lock.try_acquire():
            return f'claimed by another suite process ({self.lock.holder().describe()})'
        holder = self.trainer.probe()
        if holder is None:
            return None
        self.lock.release()
        return f'being trained by {holder.describe()}'

    def try_take(self) -> bool:
        """`take` without naming the holder (cheap enough for every step of a wait)."""
        if not self.lock.try_acquire():
            return False
        if self.trainer.probe() is None:
            return True
        self.lock.release()
        return False

    def give_up(self) -> None:
        self.lock.release()
