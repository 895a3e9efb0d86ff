"""Carry out a suite's plan: locally through tools/dist_train.sh, one run at a time or up to N
at once (`parallel`), or one SLURM job per run (`benchmark.suites.slurm`).

Locally, each run trains and then runs its evaluations in one *slot*. With several slots each
gets its own devices: ``procs`` GPUs of the visible ones (``CUDA_VISIBLE_DEVICES``), or on a
machine without a GPU an even share of this process's CPU cores (the children's affinity, and
``OMP_NUM_THREADS`` = its cores / ``procs``, at least 1); each training gets its own rendezvous
port. Lines as things change: a run started (where, its log), its epoch with ETA (from the
run's ``progress.json``, at most every `status_every_s` seconds), trained, each evaluation,
the end; the suite's ETA from its runs so far.

Each run's output goes to ``<work dir>/suite_train.log`` (every attempt appended), each
evaluation's to ``<work dir>/suite_eval_<name>.log``. SIGTERM or SIGINT to the suite reaches
every running child (a training saves a checkpoint and exits 143); the suite starts nothing
more and exits 143.
"""
from __future__ import annotations

import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Dict, Generator, List, Optional, Tuple

from benchmark.engine.checkpoints import checkpoint_candidates
from benchmark.engine.nan_guard import DIVERGED_EXIT_CODE
from benchmark.engine.preemption import PREEMPTED_EXIT_CODE
from benchmark.engine.progress import progress_line, read_progress
from benchmark.layout import REPO_ROOT, SUITE_EVAL_LOG, SUITE_TRAIN_LOG, epoch_checkpoint
from benchmark.suites.claim import PASSED_OVER, RunClaims
from benchmark.suites.outcome import Outcome, SuiteTimes
from benchmark.suites.plan import RunPlan, mark_work_dir
from benchmark.suites.process import (LoggedChild, Slot, duration, free_port, plan_slots,
                                      usable_cores, visible_gpus)
from benchmark.suites.slurm import submit_suite
from benchmark.suites.spec import Evaluation, Run, Suite, SuiteError, resolve_config

POLL_S = 0.5  # how often running children and their progress are looked at


def epochs_left(plan: RunPlan) -> int:
    """Epochs the plan still trains (a resume from epoch_<k>.pth: the rest; else all)."""
    if plan.train == 'start':
        return plan.run.max_epochs
    if plan.train == 'resume':
        found = re.fullmatch(r'epoch_(\d+)\.pth', os.path.basename(plan.checkpoint or ''))
        return plan.run.max_epochs - int(found.group(1)) if found else plan.run.max_epochs
    return 0


@dataclass
class Live:
    """A run being carried out in a slot, as the status lines see it."""

    prefix: str
    plan: RunPlan
    began: float  # monotonic
    phase: str = 'starting'  # training, evaluating
    launched: float = 0.0  # wall time the training started (older progress files are stale)
    progress: Optional[dict] = None
    shown_at: float = float('-inf')
    shown: Tuple[int, int] = (0, 0)  # (epoch, iter) of the last progress line
    started_up: bool = False  # its start-up time is counted
    trained_shown: bool = False


class SuiteRunner:
    """Runs the plans of one suite and prints what happens.

    Args:
        suite: The expanded suite.
        launcher: 'local' or 'slurm'.
        partition: SLURM partition (else the suite's ``slurm.partition``).
        out: Where progress lines go.
        env: Environment of the children (default: this process's, PYTHON set to this one).
        parallel: Local runs at once (each in its own slot).

    Raises:
        SuiteError: A bad launcher setting (before anything starts).
    """

    status_every_s = 30.0  # a training run's progress line at most this often

    def __init__(self, suite: Suite, launcher: str = 'local', partition: Optional[str] = None,
                 out: Callable[..., None] = print, env: Optional[Dict[str, str]] = None,
                 parallel: int = 1) -> None:
        self.suite, self.launcher, self.out = suite, launcher, out
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
        self.parallel = parallel
        self.slots = plan_slots(parallel, suite.procs,
                                visible_gpus(self.env) if parallel > 1 else [],
                                usable_cores())
        self.children = {s.number: LoggedChild(self.env, s.cpus) for s in self.slots}
        self.ports: Dict[int, int] = {}  # slot -> rendezvous port of its running training
        self.live: Dict[int, Live] = {}  # slot -> the run in it
        self.times = SuiteTimes(len(self.slots))
        self.pending: List[Tuple[int, RunPlan]] = []
        self.finished = 0
        self.interrupted: Optional[int] = None
        self.total = len(suite.runs)  # runs of this invocation (--only may pick fewer)
        self.claims = RunClaims(suite, out, requeue=lambda item: self.pending.append(item),
                                stop=lambda: self.interrupted is not None)  # one process per run

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

    # -- local: one run in its slot --------------------------------------------------------
    def _forward(self, signum: int, frame) -> None:
        self.interrupted = signum
        for child in self.children.values():
            child.terminate()  # a training saves a checkpoint and exits 143

    def _child(self, slot: Slot, cmd: List[str], log: str) -> Generator[None, None, int]:
        """Run `cmd` in `slot` (its devices or cores; its own rendezvous port when several
        slots run), yielding while it runs; its exit status."""
        child = self.children[slot.number]
        child.env = {**self.env, **slot.env}
        if len(self.slots) > 1:
            self.ports[slot.number] = free_port(self.ports.values())
            child.env['PORT'] = str(self.ports[slot.number])
        try:
            child.start(cmd, log)
            while True:
                code = child.poll()
                if code is not None:
                    return code
                yield
        finally:
            self.ports.pop(slot.number, None)

    def _result(self, code: int, took: str, log: str) -> str:
        if code == 0:
            return f'ok in {took}'
        if self.interrupted or code == PREEMPTED_EXIT_CODE:
            return f'interrupted (exit {code}) after {took}; log {log}'
        if code == DIVERGED_EXIT_CODE:
            return f'diverged (recorded); log {log}'
        return f'failed (exit {code}); log {log}'

    def run_local(self, index: int, plan: RunPlan, slot: Slot) -> Generator[None, None, Outcome]:
        """Carry out one run's plan in `slot` (a generator: it yields while a child runs)."""
        run = plan.run
        prefix = f'[{index}/{self.total}] {run.name}:'
        if plan.train == 'diverged' or (plan.train == 'done' and not plan.has_work):
            why = 'diverged, recorded' if plan.train == 'diverged' else 'records exist'
            self.out(f'{prefix} done ({why})')
            return Outcome(run, plan.train)
        if plan.train == 'queued':
            self.out(f'{prefix} queued (SLURM job {plan.job}); not started here')
            return Outcome(run, 'queued', job=plan.job)
        live = self.live[slot.number] = Live(prefix, plan, time.monotonic())
        try:
            # A run starts here: its training and evaluations, in this slot.
            outcome = yield from self._carry_out(live, slot)
        finally:
            del self.live[slot.number]
        self.finished += 1
        return outcome

    def _carry_out(self, live: Live, slot: Slot) -> Generator[None, None, Outcome]:
        plan, prefix = live.plan, live.prefix
        run = plan.run
        log = str(Path(run.work_dir) / SUITE_TRAIN_LOG)
        outcome = Outcome(run, 'done', log=log)
        trained_s = None
        if plan.train in ('resume', 'start'):
            mark_work_dir(run)
            verb = (f'resumed from {os.path.basename(plan.checkpoint or "")}'
                    if plan.train == 'resume' else 'started')
            self.out(f'{prefix} {verb}' + (f' ({slot.where})' if slot.where else '')
                     + f'; log {log}')
            live.phase, live.launched = 'training', time.time()
            code = yield from self._child(slot, self.train_command(plan), log)
            self._read_progress(live)
            if live.progress and live.progress.get('phase') == 'trained':
                trained_s = live.progress.get('train_s')
            self.out(f'{prefix} {verb} -> '
                     f'{self._result(code, duration(time.monotonic() - live.began), log)}')
            outcome.state = 'resumed' if plan.train == 'resume' else 'started'
            if code != 0:
                outcome.state = ('interrupted' if self.interrupted or code == PREEMPTED_EXIT_CODE
                                 else 'diverged' if code == DIVERGED_EXIT_CODE else 'failed')
                outcome.ok = outcome.state == 'diverged'
                return outcome
        else:
            self.out(f'{prefix} trained before; evaluating')
        live.phase = 'evaluating'
        for evaluation in self.suite.evaluations:
            if plan.evals.get(evaluation.name) != 'todo' or self.interrupted:
                continue
            eval_log = str(Path(run.work_dir) / SUITE_EVAL_LOG.format(evaluation.name))
            cmd = self.eval_command(run, evaluation, self.env['PYTHON'])
            self.out(f'{prefix} {evaluation.name} started; log {eval_log}')
            start = time.monotonic()
            code = yield from self._child(slot, cmd, eval_log)
            took = duration(time.monotonic() - start)
            self.out(f'{prefix} {evaluation.name} started -> {self._result(code, took, eval_log)}')
            if code != 0:
                outcome.failed_evals[evaluation.name] = eval_log
        if self.interrupted:
            outcome.state, outcome.ok = 'interrupted', False
        elif trained_s is not None:
            self.times.learn_outside(time.monotonic() - live.began - trained_s)
        return outcome

    # -- status lines ----------------------------------------------------------------------
    def _read_progress(self, live: Live) -> None:
        state = read_progress(live.plan.run.work_dir)
        if state is None or float(state.get('updated') or 0) < live.launched - 1:
            return  # none yet, or the file of an earlier attempt
        live.progress = state
        if not live.started_up and state.get('train_s') is not None:
            live.started_up = True
            late = time.time() - float(state['updated'])
            self.times.learn_startup(time.monotonic() - live.began - late - float(state['train_s']))
        if state.get('s_per_epoch') is not None:
            self.times.learn_epoch(live.plan.run.name, live.plan.run.config,
                                   float(state['s_per_epoch']))

    def _remaining(self, live: Live, now: float) -> Optional[float]:
        """Seconds until `live` ends (None: unknown yet)."""
        outside = self.times.outside_mean
        state = live.progress or {}
        spent = now - live.began
        if live.phase == 'training' and state.get('phase') == 'training':
            if state.get('eta_s') is None:
                return None
            late = time.time() - float(state['updated'])
            trained = float(state['train_s']) + late
            return max(float(state['eta_s']) - late, 0.0) + max(outside - (spent - trained), 0.0)
        if live.phase == 'evaluating' or state.get('phase') == 'trained':
            trained = float(state.get('train_s') or 0.0)
            return max(outside - (spent - trained), 0.0)
        total = self.times.run_seconds(live.plan.run.config, epochs_left(live.plan))
        return None if total is None else max(total - spent, 0.0)

    def suite_eta(self) -> Optional[float]:
        """Seconds until the last run of this invocation ends (None: not known yet)."""
        now = time.monotonic()
        remaining = [self._remaining(live, now) for live in self.live.values()]
        queued = [self.times.run_seconds(p.run.config, epochs_left(p))
                  for _, p in self.pending if p.has_work and p.train not in ('queued', 'diverged')]
        return self.times.eta(remaining, queued)

    def _eta_text(self) -> str:
        eta = self.suite_eta()
        return '' if eta is None else f' · suite ETA {duration(eta)}'

    def show_progress(self) -> None:
        """A line for each training run whose progress moved on (rate-limited)."""
        now = time.monotonic()
        training = [live for live in self.live.values() if live.phase == 'training']
        for live in training:  # all first: each line's suite ETA knows every run's progress
            self._read_progress(live)
        for live in training:
            state = live.progress
            if not state:
                continue
            if state.get('phase') == 'trained':
                if not live.trained_shown:
                    live.trained_shown = True
                    text = (f"{live.prefix} trained in {duration(float(state['train_s']))}"
                            + (f" ({state['s_per_epoch']:.1f} s/epoch)"
                               if state.get('s_per_epoch') is not None else ''))
                    if self.suite.wants_default:
                        text += '; evaluating (default protocols)'
                    self.out(text)
                continue
            at = (int(state['epoch']), int(state['iter']))
            if state.get('s_per_epoch') is None or at == live.shown:
                continue
            if now - live.shown_at >= self.status_every_s:
                live.shown, live.shown_at = at, now
                self.out(f'{live.prefix} {progress_line(state)}{self._eta_text()}')

    def _run_ended(self) -> None:
        """After a run that did work: the suite's count and ETA while runs remain."""
        left = any(p.has_work for _, p in self.pending) or self.live
        if self.interrupted or not left:
            return
        eta = self.suite_eta()
        if eta is not None:
            self.out(f'suite: {self.finished} run(s) done here, '
                     f'{len(self.live) + len(self.pending)} to go · ETA {duration(eta)}')

    # -- all -------------------------------------------------------------------------------
    def run(self, plans: List[RunPlan]) -> List[Outcome]:
        """Carry out every plan (SLURM: submit them); locally stop starting runs after an
        interruption."""
        self.total = len(plans)
        if self.launcher == 'slurm':
            return submit_suite(self, plans)
        previous = {sig: signal.signal(sig, self._forward)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            return self._run_slots(plans)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _run_slots(self, plans: List[RunPlan]) -> List[Outcome]:
        """Fill the free slots in the plans' order; step every running run; repeat."""
        self.pending = list(enumerate(plans, 1))
        outcomes: Dict[int, Outcome] = {}
        free = list(self.slots)
        active: Dict[int, Tuple[Slot, int, Generator]] = {}

        def step(slot: Slot, index: int, run: Generator) -> None:
            try:
                next(run)
                active[slot.number] = (slot, index, run)
            except StopIteration as stop:
                active.pop(slot.number, None)
                outcomes[index] = stop.value
                free.append(slot)
                free.sort(key=lambda s: s.number)
                if stop.value.state not in ('done', 'diverged', 'queued', PASSED_OVER):
                    self._run_ended()

        while True:
            while self.pending and free and not self.interrupted:
                index, plan = self.pending.pop(0)
                slot = free.pop(0)
                step(slot, index, self.claims.run(index, self.total, plan,
                                                  partial(self.run_local, index, slot=slot)))
            if not active:
                break
            time.sleep(POLL_S)
            for slot, index, run in list(active.values()):
                step(slot, index, run)
            self.show_progress()
        return [outcomes[i] for i in sorted(outcomes)]
