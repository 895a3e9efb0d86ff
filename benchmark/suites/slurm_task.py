"""One SLURM array task of a suite: a run's training (if any), then its evaluations, each a
child process with its output appended to the run's logs; stopped and requeued through
submitit (benchmark/suites/slurm.py submits the array)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import submitit
from submitit.core.job_environment import JobEnvironment

from benchmark.exit_codes import DIVERGED_EXIT_CODE, PREEMPTED_EXIT_CODE
from benchmark.layout import attempt_header
from benchmark.suites.parent_death import die_with_parent
from benchmark.suites.run_log import with_error_line
from benchmark.suites.slurm_ranks import rank_env, rendezvous


@dataclass
class Step:
    """One command of a task: 'train' or an evaluation's name, its command, its log."""

    name: str
    cmd: List[str]
    log: str


KILL_WAIT_S = 30.0  # SLURM's default KillWait: SIGTERM, then this long before SIGKILL
STOP_MARGIN_S = 5.0  # kept for the task's own work after its child has ended (scontrol, exit)


def _exit_status(proc: subprocess.Popen, timeout: Optional[float] = None) -> Optional[int]:
    """The exit status of `proc`, waiting at most `timeout` s (None: until it ends) without
    reaping it (os.waitid with WNOWAIT): a signal handler must not take Popen's lock, which the
    interrupted frame may hold. None if it is still running."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while proc.returncode is None:
        flags = os.WEXITED | os.WNOWAIT | (0 if deadline is None else os.WNOHANG)
        try:
            info = os.waitid(os.P_PID, proc.pid, flags)
        except ChildProcessError:  # reaped by Popen meanwhile
            break
        if info is not None and info.si_pid:
            return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)
    return proc.returncode


def descendants(pid: int) -> List[int]:
    """The processes below `pid` (torchrun's workers run in sessions of their own)."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as handle:
                    parent = int(handle.read().rsplit(')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def kill_wait_s() -> float:
    """SLURM's KillWait (`scontrol show config`), or its default where it cannot be read."""
    try:
        out = subprocess.run(['scontrol', 'show', 'config'], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return KILL_WAIT_S
    found = re.search(r'^KillWait\s*=\s*(\d+)', out, re.M)
    return float(found.group(1)) if found else KILL_WAIT_S


def job_state(job_id: str) -> Optional[Tuple[str, int]]:
    """(state, restarts) of a job in SLURM (`scontrol show job`), None if it cannot be asked."""
    try:
        out = subprocess.run(['scontrol', 'show', 'job', '-o', job_id], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    state = re.search(r'\bJobState=(\S+)', out.stdout)
    restarts = re.search(r'\bRestarts=(\d+)', out.stdout)
    if out.returncode != 0 or not state:
        return None
    return state.group(1), int(restarts.group(1)) if restarts else 0


class RunTask(submitit.helpers.Checkpointable):
    """A run's array task: training (if any), then its evaluations, each a child process with
    its output appended to the run's logs.

    On submitit's pre-emption signal `checkpoint` sends SIGTERM to the running child (a
    training saves a checkpoint and exits 143), waits for its end and returns this task, with
    the steps it finished, for submitit to requeue. The children ignore that signal: SLURM may
    send it to every process of the task, and only this one acts on it.

    SIGTERM to the task (``scancel``, ``scontrol requeue``, a pre-emption; under
    ``proctrack/cgroup`` SLURM sends it to the task only, which submitit alone would ignore) is
    passed on to the running child the same way. Once the child has ended the task asks SLURM
    what became of the job: requeued, it exits and SLURM starts it again (the training
    resumes); pre-empted without a requeue, it requeues itself first; cancelled, it fails
    saying so (rerunning the suite resumes the run).
    """

    def __init__(self, run: str, train: Optional[Step], evals: List[Step], python: str,
                 checkpoint_wait_s: Optional[float] = None,
                 ranks_in: Optional[str] = None) -> None:
        self.run, self.train, self.evals, self.python = run, train, evals, python
        # One task per process (slurm.nodes): the run's work dir, where the rendezvous is said
        # (`benchmark.suites.slurm_ranks`); the training command is then one rank's.
        self.ranks_in = ranks_in
        # How long `checkpoint` waits for the child after the time-limit warning (None: until
        # it ends): less than the warning's lead, so the task is requeued before the limit.
        self.checkpoint_wait_s = checkpoint_wait_s
        self.done: List[str] = []  # steps finished (kept across requeues)
        self.diverged = False
        self._proc: Optional[subprocess.Popen] = None  # the running child, and its step
        self._step: Optional[Step] = None
        self._stopped = False  # SIGTERM came to the task

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.update(_proc=None, _step=None, _stopped=False)
        return state

    def _child_setup(self) -> None:  # pragma: no cover - runs in the child before exec
        die_with_parent()  # SIGTERM to the child when the task dies
        sig = JobEnvironment._usr_sig()
        signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig, signal.SIGTERM})

    def _execute(self, step: Step, extra_env: Optional[Dict[str, str]] = None) -> int:
        Path(step.log).parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHON=self.python, **(extra_env or {}))
        sig = JobEnvironment._usr_sig()
        with open(step.log, 'a', encoding='utf-8') as handle:
            handle.write(attempt_header(step.cmd))
            handle.flush()
            # checkpoint() and _stop see the child: their signals wait until it is recorded
            signal.pthread_sigmask(signal.SIG_BLOCK, {sig, signal.SIGTERM})
            try:
                self._proc = subprocess.Popen(step.cmd, stdout=handle, stderr=subprocess.STDOUT,
                                              env=env, start_new_session=True,
                                              preexec_fn=self._child_setup)
                self._step = step
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig, signal.SIGTERM})
            # The mask holds this thread only: another thread of the task (a library's) may
            # have taken the SIGTERM before the child was recorded, leaving it unsignalled.
            if self._stopped:
                self._terminate_child()
            try:
                code = self._wait_child()
            finally:
                self._proc = self._step = None
        if self._stopped:
            self._after_stop()
        return code

    def _wait_child(self) -> int:
        """The child's exit status; after a SIGTERM to the task, waiting no longer than SLURM's
        KillWait allows (then the child is killed, and the task still has time to act)."""
        budget = None
        while True:
            try:
                return self._proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
            if self._stopped and budget is None:
                budget = time.monotonic() + max(kill_wait_s() - STOP_MARGIN_S, 1.0)
            if budget is not None and time.monotonic() > budget:
                self._kill_child('before SLURM kills the job')

    def _kill_child(self, why: str) -> None:
        """SIGKILL to the running child and everything below it."""
        proc, step = self._proc, self._step
        print(f'run {self.run}: its {step.name if step else "step"} did not end after SIGTERM; '
              f'killed {why} (it resumes from its last checkpoint)', flush=True)
        for pid in [proc.pid, *descendants(proc.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _terminate_child(self) -> None:
        """SIGTERM to the running child, if any (a training saves and exits 143)."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            try:
                os.kill(proc.pid, signal.SIGTERM)  # not Popen.send_signal: it may reap
            except ProcessLookupError:
                pass

    def _stop(self, signum, frame) -> None:  # noqa: ARG002
        """SIGTERM to the task: passed on to the running child (see the class)."""
        self._stopped = True
        self._terminate_child()

    def _after_stop(self) -> None:
        """The child ended after a SIGTERM to the task: act on what SLURM did with the job (this
        raises: nothing more runs in this task). A
        requeue (scontrol requeue, PreemptMode=REQUEUE) counts a restart at once, while the job
        is still COMPLETING; a job pre-empted without one is requeued here; a cancelled one
        fails saying so."""
        job = os.environ.get('SLURM_JOB_ID')
        found = job_state(job) if job else None
        state, restarts = found or ('state unknown', 0)
        if found and restarts > int(os.environ.get('SLURM_RESTART_COUNT') or 0):
            print(f'run {self.run}: SIGTERM, job {job} requeued by SLURM; it resumes when SLURM '
                  'starts it again', flush=True)
            raise SystemExit(PREEMPTED_EXIT_CODE)  # no result: submitit sees a requeued task
        if state == 'PREEMPTED' and os.environ.get('SLURM_PROCID', '0') == '0':
            done = subprocess.run(['scontrol', 'requeue', job], capture_output=True, text=True,
                                  timeout=60)
            if done.returncode == 0:
                print(f'run {self.run}: SIGTERM, job {job} pre-empted: requeued it', flush=True)
                raise SystemExit(PREEMPTED_EXIT_CODE)
        raise RuntimeError(
            f'run {self.run}: stopped by SIGTERM (job {job or "?"} {state}) after its training '
            f'saved a checkpoint; rerun the suite to resume it')

    def __call__(self) -> Dict[str, Any]:
        """Train, then evaluate; what happened. A training that fails raises (the task fails);
        a failed evaluation is named in the result and the others still run."""
        previous = signal.signal(signal.SIGTERM, self._stop)  # in place of submitit's bypass
        try:
            return self._steps()
        finally:
            signal.signal(signal.SIGTERM, previous)

    def _train(self) -> int:
        """Run the training step: the whole run, or (one task per process) this task's rank,
        with the store of the task of rank 0 kept alive while it trains."""
        if not self.ranks_in:
            return self._execute(self.train)
        job_env = submitit.JobEnvironment()
        store, addr, port = rendezvous(self.ranks_in, job_env)
        step = self.train  # rank 0 writes the run's log, each other rank one of its own
        if job_env.global_rank:
            step = Step(step.name, step.cmd, f'{step.log}.rank{job_env.global_rank}')
        try:
            return self._execute(step, rank_env(job_env, addr, port))
        finally:
            del store

    def _steps(self) -> Dict[str, Any]:
        rank = int(os.environ.get('SLURM_PROCID', '0')) if self.ranks_in else 0
        if self.train and self.train.name not in self.done:
            code = self._train()
            if code == PREEMPTED_EXIT_CODE and rank:  # the job stops: rank 0's task acts on it
                print(f'run {self.run}: rank {rank} stopped with the job (exit 143)', flush=True)
                raise SystemExit(PREEMPTED_EXIT_CODE)
            if code == DIVERGED_EXIT_CODE:
                self.diverged = True
            elif code == PREEMPTED_EXIT_CODE:
                raise RuntimeError(
                    f'run {self.run}: training stopped by a signal from outside the task '
                    f'(exit 143) after saving a checkpoint; rerun the suite to resume it; '
                    f'log {self.train.log}')
            elif code != 0:
                said = with_error_line(f'training failed (exit {code})', self.train.log)
                raise RuntimeError(f'run {self.run}: {said}; log {self.train.log}')
            self.done.append(self.train.name)
        failed = {}
        for step in self.evals if rank == 0 else []:  # evaluated once, by rank 0's task
            if self.diverged or step.name in self.done:
                continue
            if self._execute(step) == 0:
                self.done.append(step.name)
            else:
                failed[step.name] = step.log
        return dict(run=self.run, diverged=self.diverged, failed_evals=failed)

    def checkpoint(self) -> submitit.helpers.DelayedSubmission:
        """Stop the running child (SIGTERM: a training saves and exits 143), wait for its end
        (at most `checkpoint_wait_s`, then it is killed), and hand this task back to submitit
        for requeueing."""
        proc, step = self._proc, self._step
        if proc is not None:
            self._terminate_child()
            code = _exit_status(proc, self.checkpoint_wait_s)
            if code is None:  # still saving when the limit nears: requeue without it
                self._kill_child('before the time limit')
                code = _exit_status(proc, STOP_MARGIN_S)
            if code == 0 and step.name not in self.done:
                self.done.append(step.name)
        return super().checkpoint()
