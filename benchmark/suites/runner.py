"""Carry out a suite's plan: locally one run after another through tools/dist_train.sh, or one
SLURM job per run (`benchmark.suites.slurm`); a progress line per run.

Each run's output goes to ``<work dir>/suite_train.log`` (every attempt appended), each
evaluation's to ``<work dir>/suite_eval_<name>.log``. SIGTERM or SIGINT to the suite reaches the
running training (which saves a checkpoint and exits 143) and stops the suite with exit 143.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from benchmark.engine.checkpoints import checkpoint_candidates
from benchmark.engine.nan_guard import DIVERGED_EXIT_CODE
from benchmark.engine.preemption import PREEMPTED_EXIT_CODE
from benchmark.layout import REPO_ROOT, SUITE_EVAL_LOG, SUITE_TRAIN_LOG, epoch_checkpoint
from benchmark.suites.outcome import Outcome
from benchmark.suites.plan import RunPlan, mark_work_dir
from benchmark.suites.process import LoggedChild, duration
from benchmark.suites.slurm import submit_suite
from benchmark.suites.spec import Evaluation, Run, Suite, SuiteError, resolve_config


class SuiteRunner:
    """Runs the plans of one suite and prints what happens.

    Args:
        suite: The expanded suite.
        launcher: 'local' or 'slurm'.
        partition: SLURM partition (else the suite's ``slurm.partition``).
        out: Where progress lines go.
        env: Environment of the children (default: this process's, PYTHON set to this one).
    """

    def __init__(self, suite: Suite, launcher: str = 'local', partition: Optional[str] = None,
                 out: Callable[..., None] = print, env: Optional[Dict[str, str]] = None) -> None:
        self.suite, self.launcher, self.out = suite, launcher, out
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault('PYTHON', sys.executable)
        self.slurm = dict(suite.slurm)
        if partition:
            self.slurm['partition'] = partition
        if launcher == 'slurm' and not self.slurm.get('partition'):
            raise SuiteError('--launcher slurm needs a partition: --partition NAME, or '
                             "slurm=dict(partition='NAME') in the suite file")
        self.child = LoggedChild(self.env)
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

    # -- local -----------------------------------------------------------------------------
    def _forward(self, signum: int, frame) -> None:
        self.interrupted = signum
        self.child.terminate()  # the run saves a checkpoint and exits 143

    def execute(self, cmd: List[str], log: str) -> int:
        """Run `cmd` with its output appended to `log`; its exit status."""
        return self.child.run(cmd, log)

    def _step(self, cmd: List[str], log: str, head: str) -> int:
        self.out(head, end='', flush=True)
        start = time.monotonic()
        code = self.execute(cmd, log)
        took = duration(time.monotonic() - start)
        if code == 0:
            self.out(f' -> ok in {took}')
        elif self.interrupted or code == PREEMPTED_EXIT_CODE:
            self.out(f' -> interrupted (exit {code}) after {took}; log {log}')
        elif code == DIVERGED_EXIT_CODE:
            self.out(f' -> diverged (recorded); log {log}')
        else:
            self.out(f' -> failed (exit {code}); log {log}')
        return code

    def run_local(self, index: int, plan: RunPlan) -> Outcome:
        run = plan.run
        prefix = f'[{index}/{self.total}] {run.name}:'
        if plan.train == 'diverged' or (plan.train == 'done' and not plan.has_work):
            why = 'diverged, recorded' if plan.train == 'diverged' else 'records exist'
            self.out(f'{prefix} done ({why})')
            return Outcome(run, plan.train)
        if plan.train == 'queued':
            self.out(f'{prefix} queued (SLURM job {plan.job}); not started here')
            return Outcome(run, 'queued', job=plan.job)
        log = str(Path(run.work_dir) / SUITE_TRAIN_LOG)
        outcome = Outcome(run, 'done', log=log)
        if plan.train in ('resume', 'start'):
            mark_work_dir(run)
            verb = (f'resumed from {os.path.basename(plan.checkpoint or "")}'
                    if plan.train == 'resume' else 'started')
            code = self._step(self.train_command(plan), log, f'{prefix} {verb}')
            outcome.state = 'resumed' if plan.train == 'resume' else 'started'
            if code != 0:
                outcome.ok = False
                outcome.state = ('interrupted' if self.interrupted or code == PREEMPTED_EXIT_CODE else
                                 'diverged' if code == DIVERGED_EXIT_CODE else 'failed')
                outcome.ok = outcome.state == 'diverged'
                return outcome
        else:
            self.out(f'{prefix} trained before; evaluating')
        for evaluation in self.suite.evaluations:
            if plan.evals.get(evaluation.name) != 'todo' or self.interrupted:
                continue
            eval_log = str(Path(run.work_dir) / SUITE_EVAL_LOG.format(evaluation.name))
            cmd = self.eval_command(run, evaluation, self.env['PYTHON'])
            if self._step(cmd, eval_log, f'    {evaluation.name}: started') != 0:
                outcome.failed_evals[evaluation.name] = eval_log
        if self.interrupted:
            outcome.state, outcome.ok = 'interrupted', False
        return outcome

    # -- all -------------------------------------------------------------------------------
    def run(self, plans: List[RunPlan]) -> List[Outcome]:
        """Carry out every plan in order; stop after an interruption."""
        self.total = len(plans)
        if self.launcher == 'slurm':
            return submit_suite(self, plans)
        previous = {sig: signal.signal(sig, self._forward)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        outcomes = []
        try:
            for index, plan in enumerate(plans, 1):
                if self.interrupted:
                    break
                outcomes.append(self.run_local(index, plan))
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return outcomes
