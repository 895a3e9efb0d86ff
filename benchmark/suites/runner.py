"""Carry out a suite's plan: locally through tools/dist_train.sh, one run at a time or up to N
at once (`parallel`), or one SLURM job per run (`benchmark.suites.slurm`).

Locally, each run trains and then runs its evaluations in one *slot*. With several slots each
gets its own devices: ``procs`` GPUs of the visible ones (``CUDA_VISIBLE_DEVICES``), or on a
machine without a GPU an even share of this process's CPU cores (the children's affinity, and
``OMP_NUM_THREADS`` = its cores / ``procs``, at least 1); each training gets its own rendezvous
port. Lines as things change: a run started (where, its log), each evaluation, the end; its
epoch and ETA, and the suite's (`benchmark.suites.status`).

One loop (`SuiteRunner.run_local`) starts runs in the free slots in the plans' order, then
every `POLL_S` seconds looks at each run in a slot; when its child has ended, the run's next
step starts. A run's steps: claim (`begin`, `claimed`), train, evaluate (`evaluate_next`, one
at a time), record (`record`).

Each run's output goes to ``<work dir>/suite_train.log`` (every attempt appended), each
evaluation's to ``<work dir>/suite_eval_<name>.log``. SIGTERM or SIGINT to the suite reaches
every running child (a training saves a checkpoint and exits 143); the suite starts nothing
more and exits 128 + the signal (130 for SIGINT, 143 for SIGTERM). A second one ends the suite
at once; its children get SIGTERM again (a training saves and exits).
"""
from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

from benchmark import stop
from benchmark.engine.checkpoints import checkpoint_candidates
from benchmark.exit_codes import DIVERGED_EXIT_CODE, PREEMPTED_EXIT_CODE
from benchmark.layout import REPO_ROOT, SUITE_EVAL_LOG, SUITE_TRAIN_LOG, epoch_checkpoint
from benchmark.suites.claim import PASSED_OVER, RunClaim
from benchmark.suites.outcome import Outcome, SuiteTimes
from benchmark.suites.plan import RunPlan, index_records, mark_work_dir, plan_run
from benchmark.suites.process import (LoggedChild, Slot, duration, plan_slots,
                                      usable_cores, visible_gpus)
from benchmark.suites.report import read_suite_records
from benchmark.suites.run_log import with_error_line
from benchmark.suites.slurm import submit_suite
from benchmark.suites.spec import Evaluation, Run, Suite, SuiteError, resolve_config
from benchmark.suites.status import RunStatus, StatusLines

POLL_S = 0.5  # how often running children and their progress are looked at
NO_WORK = ('done', 'diverged', 'queued', PASSED_OVER)  # outcomes of runs that did nothing here


def ended(code: int, took: str, log: str, interrupted: bool) -> Tuple[str, str]:
    """How a child ended, and in words: ('ok', 'ok in 3m09s'), ('failed', 'failed (exit 1);
    log PATH'), ('interrupted', 'interrupted (exit 143) after 5s; log PATH') or ('diverged',
    'diverged (recorded); log PATH'); a failure or a divergence with the `error:` line its
    log ends with, 'failed (exit 2): error: ...; log PATH'."""
    if code == 0:
        return 'ok', f'ok in {took}'
    if interrupted or code == PREEMPTED_EXIT_CODE:
        return 'interrupted', f'interrupted (exit {code}) after {took}; log {log}'
    if code == DIVERGED_EXIT_CODE:
        return 'diverged', f"{with_error_line('diverged (recorded)', log)}; log {log}"
    return 'failed', f"{with_error_line(f'failed (exit {code})', log)}; log {log}"


@dataclass(kw_only=True)
class Live(RunStatus):
    """A run in a slot: its claim, the step it is at, and its status."""

    index: int
    slot: Slot
    claim: RunClaim
    outcome: Optional[Outcome] = None
    todo: List[Evaluation] = field(default_factory=list)  # evaluations not started yet
    step: Tuple[str, str, float] = ('', '', 0.0)  # the running child: name, log, monotonic start
    trained_s: Optional[float] = None  # its training loop's seconds, once trained


class SuiteRunner:
    """Runs the plans of one suite and prints what happens.

    Args:
        suite: The expanded suite.
        launcher: 'local' or 'slurm'.
        partition: SLURM partition (else the suite's ``slurm.partition``).
        out: Where progress lines go.
        env: Environment of the children (default: this process's, PYTHON set to this one).
        parallel: Local runs at once (each in its own slot).
        wait: SLURM: wait for the submitted array to end.

    Raises:
        SuiteError: A bad launcher setting (before anything starts).
    """

    def __init__(self, suite: Suite, launcher: str = 'local', partition: Optional[str] = None,
                 out: Callable[..., None] = print, env: Optional[Dict[str, str]] = None,
                 parallel: int = 1, wait: bool = False) -> None:
        self.suite, self.launcher, self.out, self.wait = suite, launcher, out, wait
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault('PYTHON', sys.executable)
        self.slurm = dict(suite.slurm)
        if partition:
            self.slurm['partition'] = partition
        if launcher == 'slurm' and not self.slurm.get('partition'):
            raise SuiteError('--launcher slurm needs a partition: --partition NAME, or '
                             "slurm=dict(partition='NAME') in the suite file")
        if parallel < 1:
            raise SuiteError(f'--parallel must be >= 1, got {parallel}')
        if launcher == 'slurm' and parallel != 1:
            raise SuiteError('--parallel is for the local launcher; SLURM runs the jobs side by '
                             'side already')
        self.slots = plan_slots(parallel, suite.procs,
                                visible_gpus(self.env) if parallel > 1 else [],
                                usable_cores())
        self.children = {s.number: LoggedChild(self.env, s.cpus) for s in self.slots}
        self.times = SuiteTimes(len(self.slots))
        self.status = StatusLines(self.times, out, suite.wants_default)
        self.pending: List[Tuple[int, RunPlan]] = []  # (index, plan) not started yet, in order
        self.free: List[Slot] = []
        self.live: Dict[int, Live] = {}  # slot -> the run in it
        self.outcomes: Dict[int, Outcome] = {}  # index -> what happened to the run
        self.passed: Set[int] = set()  # indices of runs passed over once (another process's)
        self.finished = 0  # runs carried out here
        self.interrupted: Optional[int] = None
        self.total = len(suite.runs)  # runs of this invocation (--only may pick fewer)

    # -- commands --------------------------------------------------------------------------
    def train_args(self, plan: RunPlan) -> List[str]:
        """tools/train.py's arguments after CONFIG (resume, evaluation, overrides)."""
        run = plan.run
        args = ['--work-dir', run.work_dir, '--results-dir', self.suite.results_dir]
        if plan.train == 'resume' or self.launcher == 'slurm':  # sbatch: resume if a requeue
            args.append('--resume')
        if not self.suite.wants_default:
            args.append('--no-eval')
        return args + ['--cfg-options', *run.option_args]

    def train_command(self, plan: RunPlan) -> List[str]:
        return ['bash', str(REPO_ROOT / 'tools' / 'dist_train.sh'), resolve_config(plan.run.config),
                str(self.suite.procs), *self.train_args(plan)]

    def eval_command(self, run: Run, evaluation: Evaluation, python: str) -> List[str]:
        checkpoint = epoch_checkpoint(run.work_dir, run.max_epochs)
        if not os.path.isfile(checkpoint) and self.launcher == 'local':
            found = checkpoint_candidates(run.work_dir)
            checkpoint = found[0] if found else checkpoint
        cmd = [python, str(REPO_ROOT / 'tools' / 'eval.py'), resolve_config(run.config), checkpoint,
               '--protocols', *evaluation.protocols, '--results-dir', self.suite.results_dir,
               '--work-dir', run.work_dir]
        for flag, value in (('--eval-data', evaluation.eval_data),
                            ('--data-root', evaluation.data_root),
                            ('--linear-config', evaluation.linear_config),
                            ('--device', evaluation.device)):
            if value:
                cmd += [flag, value]
        return cmd + ['--cfg-options', *run.option_args]

    # -- the loop --------------------------------------------------------------------------
    def run(self, plans: List[RunPlan]) -> List[Outcome]:
        """Carry out every plan (SLURM: submit them); locally stop starting runs after an
        interruption."""
        self.total = len(plans)
        if self.launcher == 'slurm':
            return submit_suite(self, plans)
        stops = (signal.SIGTERM, signal.SIGINT)
        previous = {sig: signal.signal(sig, self._forward) for sig in stops}
        # Taken here even where the caller blocked them (a service manager, a test runner):
        # blocked, they would wait unseen and the children would inherit them blocked.
        mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        try:
            return self.run_local(plans)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _forward(self, signum: int, frame) -> None:
        if self.interrupted is not None:  # the second: at once; each child's group gets
            stop.hard_exit(self.interrupted)  # SIGTERM, and a training saves and exits 143
        self.interrupted = signum
        for child in self.children.values():
            child.terminate()  # a training saves a checkpoint and exits 143

    def run_local(self, plans: List[RunPlan]) -> List[Outcome]:
        """Start runs in the free slots, in the plans' order; look at the runs in the slots
        (each ended child: the run's next step); repeat until no run is left. The outcomes in
        the plans' order."""
        self.pending, self.free = list(enumerate(plans, 1)), list(self.slots)
        while True:
            while self.pending and self.free and not self.interrupted:
                index, plan = self.pending.pop(0)
                self.begin(index, plan, self.free.pop(0))
            if not self.live:
                break
            time.sleep(POLL_S)
            for live in list(self.live.values()):
                self.advance(live)
            self.status.show(self.running(), [plan for _, plan in self.pending])
        return [self.outcomes[i] for i in sorted(self.outcomes)]

    # -- one run: claim, train, evaluate, record -------------------------------------------
    def replan(self, plan: RunPlan) -> RunPlan:
        """The run's plan from the records on disk now."""
        records = index_records(read_suite_records(self.suite.record_dirs))
        return plan_run(plan.run, self.suite, records)

    def begin(self, index: int, plan: RunPlan, slot: Slot) -> None:
        """Take a run into `slot`. One without work is recorded at once. Else its claim: ours,
        the run starts; another process's, the run is passed over (back to the end of the
        queue) the first time, and waited for the second."""
        prefix = f'[{index}/{self.total}] {plan.run.name}:'
        live = self.live[slot.number] = Live(plan=plan, prefix=prefix, index=index, slot=slot,
                                             claim=RunClaim(plan.run.work_dir))
        if not plan.has_work:  # done, diverged or queued: nothing to claim
            return self.record(live, self.nothing_to_do(live))
        holder = live.claim.take()
        if holder is None:
            return self.claimed(live)
        if index in self.passed:
            self.out(f'{prefix} {holder}; waiting for it')
            live.phase = 'waiting'
            return
        self.passed.add(index)
        self.out(f'{prefix} {holder}; coming back to it at the end')
        self.pending.append((index, plan))
        self.record(live, Outcome(plan.run, PASSED_OVER))

    def nothing_to_do(self, live: Live) -> Outcome:
        """The line and outcome of a plan without work: done, diverged, or queued on SLURM."""
        plan = live.plan
        if plan.train == 'queued':
            self.out(f'{live.prefix} queued (SLURM job {plan.job}); not started here')
            return Outcome(plan.run, 'queued', job=plan.job)
        why = 'diverged, recorded' if plan.train == 'diverged' else 'records exist'
        self.out(f'{live.prefix} done ({why})')
        return Outcome(plan.run, plan.train)

    def claimed(self, live: Live) -> None:
        """The run's claim is ours: plan it again (another process may have done it meanwhile)
        and start its training, or its first evaluation."""
        live.plan = plan = self.replan(live.plan)
        if not plan.has_work:
            return self.record(live, self.nothing_to_do(live))
        run = plan.run
        live.began = time.monotonic()
        live.outcome = Outcome(run, 'done', log=str(Path(run.work_dir) / SUITE_TRAIN_LOG))
        live.todo = [e for e in self.suite.evaluations if plan.evals.get(e.name) == 'todo']
        if plan.train not in ('resume', 'start'):
            self.out(f'{live.prefix} trained before; evaluating')
            return self.evaluate_next(live)
        mark_work_dir(run)
        verb = (f'resumed from {os.path.basename(plan.checkpoint or "")}'
                if plan.train == 'resume' else 'started')
        where = f' ({live.slot.where})' if live.slot.where else ''
        self.out(f'{live.prefix} {verb}{where}; log {live.outcome.log}')
        live.phase, live.launched = 'training', time.time()
        self.start_child(live, verb, self.train_command(plan), live.outcome.log)

    def start_child(self, live: Live, name: str, cmd: List[str], log: str) -> None:
        """Start `cmd` in the run's slot (its devices or cores), its output appended to `log`."""
        slot = live.slot
        child = self.children[slot.number]
        child.env = {**self.env, **slot.env}
        child.start(cmd, log)
        live.step = (name, log, time.monotonic())

    def advance(self, live: Live) -> None:
        """Look at a run in its slot: waiting, try its claim again (an interruption ends the
        wait); else whether its child has ended, and then its next step."""
        if live.phase == 'waiting':
            if self.interrupted:
                self.record(live, Outcome(live.plan.run, 'interrupted', ok=False))
            elif live.claim.try_take():
                self.claimed(live)
            return
        code = self.children[live.slot.number].poll()
        if code is None:
            return
        name, log, start = live.step
        how, words = ended(code, duration(time.monotonic() - start), log, bool(self.interrupted))
        label = name if live.phase == 'training' else f'{name} started'
        self.out(f'{live.prefix} {label} -> {words}')
        if live.phase == 'training':
            return self.trained(live, how)
        if how != 'ok':
            live.outcome.failed_evals[name] = log
        self.evaluate_next(live)

    def trained(self, live: Live, how: str) -> None:
        """The training ended (`how`: as `ended` says): its evaluations next, or, if it did
        not end well, its outcome."""
        self.status.read(live)
        if live.progress and live.progress.get('phase') == 'trained':
            live.trained_s = live.progress.get('train_s')
        if how != 'ok':
            live.outcome.state, live.outcome.ok = how, how == 'diverged'
            return self.record(live, live.outcome)
        live.outcome.state = 'resumed' if live.plan.train == 'resume' else 'started'
        self.evaluate_next(live)

    def evaluate_next(self, live: Live) -> None:
        """Start the run's next evaluation; none left (or the suite interrupted), its outcome."""
        live.phase = 'evaluating'
        if live.todo and not self.interrupted:
            evaluation = live.todo.pop(0)
            log = str(Path(live.plan.run.work_dir) / SUITE_EVAL_LOG.format(evaluation.name))
            self.out(f'{live.prefix} {evaluation.name} started; log {log}')
            cmd = self.eval_command(live.plan.run, evaluation, self.env['PYTHON'])
            return self.start_child(live, evaluation.name, cmd, log)
        if self.interrupted:
            live.outcome.state, live.outcome.ok = 'interrupted', False
        elif live.trained_s is not None:
            self.times.learn_outside(time.monotonic() - live.began - live.trained_s)
        self.record(live, live.outcome)

    def record(self, live: Live, outcome: Outcome) -> None:
        """The run has ended here: its claim and slot given back, its outcome kept; after a run
        that did work, the suite's count and ETA."""
        live.claim.give_up()
        del self.live[live.slot.number]
        self.free = sorted(self.free + [live.slot], key=lambda s: s.number)
        self.outcomes[live.index] = outcome
        if live.phase in ('training', 'evaluating'):
            self.finished += 1
        if outcome.state not in NO_WORK and not self.interrupted:
            self.status.run_ended(self.finished, self.running(),
                                  [plan for _, plan in self.pending])

    def running(self) -> List[Live]:
        """The runs in the slots, but those waiting for another process's claim."""
        return [live for live in self.live.values() if live.phase != 'waiting']
