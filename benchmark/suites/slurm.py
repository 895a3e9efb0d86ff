"""Submit a suite's runs to SLURM: one batch job per run, training then its evaluations.

Each job trains with ``--resume`` (a requeued job continues from its checkpoint) and gets
SIGUSR1 two minutes before its time limit, on which the run saves and exits 143. Every function
takes the suite's `SuiteRunner` (its suite, SLURM keys, commands, environment and output).
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List

from benchmark.layout import REPO_ROOT, SLURM_JOB_FILE, SLURM_SCRIPT
from benchmark.suites.outcome import Outcome
from benchmark.suites.plan import RunPlan, mark_work_dir
from benchmark.suites.spec import Run, resolve_config


def slurm_script(runner, plan: RunPlan) -> str:
    """The batch script of one run: training (always --resume: a requeue continues), then
    the evaluations still to do, each inside the allocation."""
    run, gpn, cpus = plan.run, _gpus_per_node(runner), runner.slurm.get('cpus_per_task', 5)
    q = shlex.quote
    lines = ['#!/usr/bin/env bash',
             f'# Suite {runner.suite.name}, run {run.name}: written by tools/run_suite.py; '
             'rerunning the suite skips what finished.',
             'set -eo pipefail', f'cd {q(os.getcwd())}',
             f'export PYTHON="${{PYTHON:-{sys.executable}}}"']
    if plan.train in ('resume', 'start'):
        lines.append(f'GPUS={runner.suite.procs} GPUS_PER_NODE={gpn} CPUS_PER_TASK={cpus} bash '
                     + ' '.join(q(c) for c in [
                         str(REPO_ROOT / 'tools' / 'slurm_train.sh'), runner.slurm['partition'],
                         _job_name(runner, run), resolve_config(run.config),
                         *runner.train_args(plan)]))
    for evaluation in runner.suite.evaluations:
        if evaluation.is_default or plan.evals.get(evaluation.name) == 'done':
            continue
        cmd = runner.eval_command(run, evaluation, '"$PYTHON"')
        lines.append('srun --ntasks=1 --nodes=1 --gres=gpu:1 "$PYTHON" '
                     + ' '.join(q(c) for c in cmd[1:]))
    return '\n'.join(lines) + '\n'

def _gpus_per_node(runner) -> int:
    return int(runner.slurm.get('gpus_per_node') or min(runner.suite.procs, 8))

def _job_name(runner, run: Run) -> str:
    return f'{runner.suite.name}.{run.name}'

def sbatch_command(runner, plan: RunPlan, script: str) -> List[str]:
    run, gpn = plan.run, _gpus_per_node(runner)
    cmd = ['sbatch', '--parsable', f'--job-name={_job_name(runner, run)}',
           f"--partition={runner.slurm['partition']}", f'--ntasks={runner.suite.procs}',
           f'--ntasks-per-node={min(gpn, runner.suite.procs)}', f'--gres=gpu:{gpn}',
           f"--cpus-per-task={runner.slurm.get('cpus_per_task', 5)}",
           f'--output={Path(run.work_dir) / "slurm-%j.out"}']
    if runner.slurm.get('time'):  # USR1 two minutes before the limit: save, exit 143
        cmd += [f"--time={runner.slurm['time']}", '--signal=USR1@120']
    return cmd + list(runner.slurm.get('extra') or []) + [script]

def submit_run(runner, index: int, plan: RunPlan) -> Outcome:
    run = plan.run
    prefix = f'[{index}/{runner.total}] {run.name}:'
    if not plan.has_work:
        queued = plan.train == 'queued' or 'queued' in plan.evals.values()
        state = 'queued' if queued else plan.train
        runner.out(f'{prefix} ' + (f'queued (SLURM job {plan.job})' if state == 'queued'
                                 else 'done (records exist)'))
        return Outcome(run, state, job=plan.job)
    mark_work_dir(run)
    script = Path(run.work_dir) / SLURM_SCRIPT
    script.write_text(slurm_script(runner, plan), encoding='utf-8')
    script.chmod(0o755)
    cmd = sbatch_command(runner, plan, str(script))
    try:
        answer = subprocess.run(cmd, capture_output=True, text=True, env=runner.env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        runner.out(f'{prefix} sbatch failed ({err})')
        return Outcome(run, 'failed', ok=False)
    job = answer.stdout.strip().split(';')[0]
    if answer.returncode != 0 or not job:
        reason = (answer.stderr.strip().splitlines() or [f'exit {answer.returncode}'])[-1]
        runner.out(f'{prefix} sbatch failed: {reason}')
        return Outcome(run, 'failed', ok=False)
    (Path(run.work_dir) / SLURM_JOB_FILE).write_text(job + '\n', encoding='utf-8')
    what = {'resume': 'resume', 'start': 'start'}.get(plan.train, 'evaluations')
    log = str(Path(run.work_dir) / f'slurm-{job}.out')
    runner.out(f'{prefix} submitted SLURM job {job} ({what}); log {log}')
    return Outcome(run, 'submitted', log=log, job=job)


def submit_suite(runner, plans: List[RunPlan]) -> List[Outcome]:
    """Submit every plan's run; their outcomes."""
    return [submit_run(runner, index, plan) for index, plan in enumerate(plans, 1)]
