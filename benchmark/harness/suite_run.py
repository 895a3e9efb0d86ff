"""Carry out a suite's plan: locally one run after another through tools/dist_train.sh, or one
SLURM job per run through tools/slurm_train.sh; a progress line per run and a summary.

Each run's output goes to ``<work dir>/suite_train.log`` (every attempt appended), each
evaluation's to ``<work dir>/suite_eval_<name>.log``. SIGTERM or SIGINT to the suite reaches the
running training (which saves a checkpoint and exits 143) and stops the suite with exit 143; a
suite killed outright takes its training down with it (the child's parent-death signal), so a
restart with the same command resumes instead of racing an orphan.
"""
from __future__ import annotations

import ctypes
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from benchmark.engine.checkpoints import checkpoint_candidates
from benchmark.engine.nan_guard import DIVERGED_EXIT_CODE
from benchmark.harness.suite_plan import RunPlan, mark_work_dir
from benchmark.harness.suite_spec import Evaluation, Run, Suite, SuiteError, resolve_config
from benchmark.layout import (REPO_ROOT, SLURM_JOB_FILE, SLURM_SCRIPT, SUITE_EVAL_LOG,
                              SUITE_TRAIN_LOG, epoch_checkpoint)

PREEMPTED = 143  # tools/dist_train.sh and tools/train.py after SIGTERM/SIGUSR1


@dataclass
class Outcome:
    """What happened to one run in this invocation."""

    run: Run
    state: str  # done, diverged, queued, resumed, started, submitted, failed, interrupted
    ok: bool = True
    log: Optional[str] = None
    failed_evals: Dict[str, str] = field(default_factory=dict)  # evaluation -> log
    job: Optional[str] = None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGTERM this child when the suite dies (PR_SET_PDEATHSIG), as a pre-emption."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f'{minutes}m{secs:02d}s' if minutes else f'{secs}s'


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
        self.child: Optional[subprocess.Popen] = None
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
                            ('--linear-config', evaluation.linear_config)):
            if value:
                cmd += [flag, value]
        return cmd + ['--cfg-options', *run.option_args]

    # -- local -----------------------------------------------------------------------------
    def _forward(self, signum: int, frame) -> None:
        self.interrupted = signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)  # the run saves a checkpoint and exits 143

    def execute(self, cmd: List[str], log: str) -> int:
        """Run `cmd` with its output appended to `log`; its exit status."""
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, 'a', encoding='utf-8') as handle:
            handle.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} "
                         f'{" ".join(shlex.quote(c) for c in cmd)}\n')
            handle.flush()
            self.child = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT,
                                          env=self.env, start_new_session=True,
                                          preexec_fn=_die_with_parent)
            try:
                while True:  # short waits: a signal taken by another thread (torch's, wandb's)
                    try:     # must not wait for the child's exit before it is forwarded
                        return self.child.wait(timeout=0.5)
                    except subprocess.TimeoutExpired:
                        continue
            finally:
                self.child = None

    def _step(self, cmd: List[str], log: str, head: str) -> int:
        self.out(head, end='', flush=True)
        start = time.monotonic()
        code = self.execute(cmd, log)
        took = _duration(time.monotonic() - start)
        if code == 0:
            self.out(f' -> ok in {took}')
        elif self.interrupted or code == PREEMPTED:
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
                outcome.state = ('interrupted' if self.interrupted or code == PREEMPTED else
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

    # -- SLURM -----------------------------------------------------------------------------
    def slurm_script(self, plan: RunPlan) -> str:
        """The batch script of one run: training (always --resume: a requeue continues), then
        the evaluations still to do, each inside the allocation."""
        run, gpn, cpus = plan.run, self._gpus_per_node(), self.slurm.get('cpus_per_task', 5)
        q = shlex.quote
        lines = ['#!/usr/bin/env bash',
                 f'# Suite {self.suite.name}, run {run.name}: written by tools/run_suite.py; '
                 'rerunning the suite skips what finished.',
                 'set -eo pipefail', f'cd {q(os.getcwd())}',
                 f'export PYTHON="${{PYTHON:-{sys.executable}}}"']
        if plan.train in ('resume', 'start'):
            lines.append(f'GPUS={self.suite.procs} GPUS_PER_NODE={gpn} CPUS_PER_TASK={cpus} bash '
                         + ' '.join(q(c) for c in [
                             str(REPO_ROOT / 'tools' / 'slurm_train.sh'), self.slurm['partition'],
                             self._job_name(run), resolve_config(run.config),
                             *self.train_args(plan)]))
        for evaluation in self.suite.evaluations:
            if evaluation.is_default or plan.evals.get(evaluation.name) == 'done':
                continue
            cmd = self.eval_command(run, evaluation, '"$PYTHON"')
            lines.append('srun --ntasks=1 --nodes=1 --gres=gpu:1 "$PYTHON" '
                         + ' '.join(q(c) for c in cmd[1:]))
        return '\n'.join(lines) + '\n'

    def _gpus_per_node(self) -> int:
        return int(self.slurm.get('gpus_per_node') or min(self.suite.procs, 8))

    def _job_name(self, run: Run) -> str:
        return f'{self.suite.name}.{run.name}'

    def sbatch_command(self, plan: RunPlan, script: str) -> List[str]:
        run, gpn = plan.run, self._gpus_per_node()
        cmd = ['sbatch', '--parsable', f'--job-name={self._job_name(run)}',
               f"--partition={self.slurm['partition']}", f'--ntasks={self.suite.procs}',
               f'--ntasks-per-node={min(gpn, self.suite.procs)}', f'--gres=gpu:{gpn}',
               f"--cpus-per-task={self.slurm.get('cpus_per_task', 5)}",
               f'--output={Path(run.work_dir) / "slurm-%j.out"}']
        if self.slurm.get('time'):  # USR1 two minutes before the limit: save, exit 143
            cmd += [f"--time={self.slurm['time']}", '--signal=USR1@120']
        return cmd + list(self.slurm.get('extra') or []) + [script]

    def run_slurm(self, index: int, plan: RunPlan) -> Outcome:
        run = plan.run
        prefix = f'[{index}/{self.total}] {run.name}:'
        if not plan.has_work:
            queued = plan.train == 'queued' or 'queued' in plan.evals.values()
            state = 'queued' if queued else plan.train
            self.out(f'{prefix} ' + (f'queued (SLURM job {plan.job})' if state == 'queued'
                                     else 'done (records exist)'))
            return Outcome(run, state, job=plan.job)
        mark_work_dir(run)
        script = Path(run.work_dir) / SLURM_SCRIPT
        script.write_text(self.slurm_script(plan), encoding='utf-8')
        script.chmod(0o755)
        cmd = self.sbatch_command(plan, str(script))
        try:
            answer = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as err:
            self.out(f'{prefix} sbatch failed ({err})')
            return Outcome(run, 'failed', ok=False)
        job = answer.stdout.strip().split(';')[0]
        if answer.returncode != 0 or not job:
            reason = (answer.stderr.strip().splitlines() or [f'exit {answer.returncode}'])[-1]
            self.out(f'{prefix} sbatch failed: {reason}')
            return Outcome(run, 'failed', ok=False)
        (Path(run.work_dir) / SLURM_JOB_FILE).write_text(job + '\n', encoding='utf-8')
        what = {'resume': 'resume', 'start': 'start'}.get(plan.train, 'evaluations')
        log = str(Path(run.work_dir) / f'slurm-{job}.out')
        self.out(f'{prefix} submitted SLURM job {job} ({what}); log {log}')
        return Outcome(run, 'submitted', log=log, job=job)

    # -- all -------------------------------------------------------------------------------
    def run(self, plans: List[RunPlan]) -> List[Outcome]:
        """Carry out every plan in order; stop after an interruption."""
        step = self.run_slurm if self.launcher == 'slurm' else self.run_local
        self.total = len(plans)
        previous = {sig: signal.signal(sig, self._forward)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        outcomes = []
        try:
            for index, plan in enumerate(plans, 1):
                if self.interrupted:
                    break
                outcomes.append(step(index, plan))
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return outcomes


def summary_line(outcomes: List[Outcome], total: int, interrupted: bool) -> str:
    """'6 runs: 2 done before, 3 started, 1 failed (x); ...' for the end of the output."""
    order = ('done', 'diverged', 'queued', 'resumed', 'started', 'submitted', 'failed',
             'interrupted')
    counts = {s: [o for o in outcomes if o.state == s] for s in order}
    words = {'done': 'done before', 'diverged': 'diverged'}
    parts = [f'{len(items)} {words.get(s, s)}' for s, items in counts.items() if items]
    failed = [o.run.name for o in counts['failed']]
    evals = sum(len(o.failed_evals) for o in outcomes)
    text = f'{total} run(s): ' + ', '.join(parts)
    if failed:
        text += f" (failed: {', '.join(failed)})"
    if evals:
        text += f'; {evals} evaluation(s) failed'
    if len(outcomes) < total:
        text += f'; {total - len(outcomes)} not reached'
    return text + ('; interrupted: rerun the same command to continue' if interrupted else '')
