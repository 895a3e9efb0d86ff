"""Submit a suite's runs to SLURM through submitit: one job array, one task per run.

Each task trains its run (``tools/dist_train.sh CONFIG PROCS ... --resume``), then runs the
evaluations still to do, inside its allocation. submitit asks SLURM for its pre-emption signal
(USR2) ``signal_delay_s`` seconds before the time limit; the task then sends SIGTERM to its
training, which saves a checkpoint and exits 143, and submitit requeues the task, which
resumes from that checkpoint. The suite's ``slurm=dict(...)`` keys map to submitit's
parameters (`PARAMETERS`; docs/suites.md has the table). ``slurm=dict(cluster='local')`` runs
the same array on this machine through submitit's local executor.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import submitit

from benchmark.layout import REPO_ROOT, SUITE_EVAL_LOG, SUITE_TRAIN_LOG
from benchmark.suites.claim import RunClaim
from benchmark.suites.outcome import Outcome
from benchmark.suites.plan import RunPlan, mark_work_dir
from benchmark.suites.slurm_queue import (WAIT_POLL_S, drop_submitting, note_submitting,
                                          record_job, wait_task)
from benchmark.suites.slurm_task import RunTask, Step
from benchmark.suites.snapshot import SNAPSHOT_DIR, in_snapshot, snapshot_code
from benchmark.suites.spec import SuiteError, resolve_config

# submitit's private names used here, each tested by name (tests/suites/test_suite_slurm.py).
SUBMITIT_PRIVATE_API = ('JobEnvironment._usr_sig', 'AutoExecutor._executor')

# The suite's slurm keys and what each sets (AutoExecutor parameters; slurm_* only on SLURM).
PARAMETERS = {
    'partition': 'slurm_partition',
    'time': 'timeout_min',  # SLURM's time format or minutes
    'gpus_per_node': 'gpus_per_node',  # default: procs; 0 for CPU processes
    'cpus_per_task': 'cpus_per_task',  # the run's task: all its processes; default 5 per process
    'mem': 'slurm_mem',
    'account': 'slurm_account',
    'qos': 'slurm_qos',
    'constraint': 'slurm_constraint',
    'array_parallelism': 'slurm_array_parallelism',  # tasks running at once
    'signal_delay_s': 'slurm_signal_delay_s',  # pre-emption signal this long before the limit
    'max_requeues': 'max_num_timeout',  # requeues after reaching the time limit
    'extra': 'slurm_additional_parameters',  # any other sbatch option: dict(exclusive=True)
    'cluster': 'cluster',  # 'slurm', or 'local' (this machine, for trying a submission)
    'nodes': 'nodes',  # set: one task per process over this many nodes (slurm_ranks)
    'poll_s': '',  # not submitit's: how often --wait looks at each task (slurm_queue.wait_task)
}
CPUS_PER_PROCESS = 5
SIGNAL_DELAY_S = 120
MAX_REQUEUES = 30  # at the time limit (DINOv2's number); pre-emptions are not counted
# After the time-limit warning the task waits for its training's save at most signal_delay_s
# less this (at least half of it), leaving the rest for submitit's requeue.
REQUEUE_MARGIN_S = 30
LOCAL_TIMEOUT_MIN = 7 * 24 * 60  # cluster='local' without a time: a week
SUBMITIT_DIR = 'submitit'  # work_dirs/suites/<name>/submitit/<job id>/: submitit's files


# -- the suite's slurm keys -> submitit ------------------------------------------------------------

def time_minutes(value: Any) -> int:
    """Minutes of a SLURM time limit: 90, '90', '30:00' (min:s), '48:00:00', '2-00',
    '2-12:00', '2-12:00:00' (days-h[:min[:s]]).

    Raises:
        ValueError: Another spelling, or no time at all.
    """
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r'(\d+-)?\d+(:\d+){0,2}', text):
        raise ValueError(value)
    days, _, rest = text.rpartition('-')
    parts = [int(p) for p in rest.split(':')]
    if days:  # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = (parts + [0, 0])[:3]
    elif len(parts) == 3:  # hours:minutes:seconds
        hours, minutes, seconds = parts
    else:  # minutes[:seconds]
        hours, minutes, seconds = 0, parts[0], (parts + [0])[1]
    total = ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise ValueError(value)
    return math.ceil(total / 60)


def _positive_int(slurm: dict, key: str, where: str, default: Any = None, low: int = 1) -> Any:
    value = slurm.get(key, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
        raise SuiteError(f'{where}: slurm.{key} must be an integer >= {low}, got {value!r}')
    return value


def wait_poll_s(slurm: Dict[str, Any]) -> Any:
    """How often --wait looks at each task: the suite's slurm.poll_s, else WAIT_POLL_S."""
    return slurm.get('poll_s', WAIT_POLL_S)


def executor_settings(slurm: Dict[str, Any], procs: int, name: str,
                      where: str) -> Tuple[str, Dict[str, Any], int]:
    """(cluster, AutoExecutor parameters, requeues at the time limit) of a suite's slurm keys (which
    `benchmark.suites.spec` checked against SLURM_KEYS).

    Raises:
        SuiteError: A value of the wrong form, in one line.
    """
    cluster = slurm.get('cluster', 'slurm')
    if cluster not in ('slurm', 'local'):
        raise SuiteError(f"{where}: slurm.cluster must be 'slurm' or 'local' (this machine), "
                         f'got {cluster!r}')
    nodes = _positive_int(slurm, 'nodes', where)
    if nodes is not None and procs % nodes:
        raise SuiteError(f'{where}: slurm.nodes ({nodes}) must divide procs ({procs}): the '
                         'same number of processes on each node')
    per_node = procs // nodes if nodes else procs  # processes (and GPUs) on each node
    # One task per run (torchrun starts its processes), or with `nodes` one task per process.
    params: Dict[str, Any] = dict(name=name, nodes=nodes or 1,
                                  tasks_per_node=per_node if nodes else 1)
    if slurm.get('time') is None:
        if cluster == 'slurm':
            raise SuiteError(f"{where}: slurm.time is missing: each task's time limit, e.g. "
                             "time='24:00:00' (a task that reaches it is requeued and resumes)")
        params['timeout_min'] = LOCAL_TIMEOUT_MIN
    else:
        try:
            params['timeout_min'] = time_minutes(slurm['time'])
        except ValueError:
            raise SuiteError(f"{where}: slurm.time {slurm['time']!r} is not a SLURM time; use "
                             "e.g. '48:00:00', '2-00:00:00' or minutes (90)") from None
    gpus = _positive_int(slurm, 'gpus_per_node', where, per_node, low=0)
    if gpus not in (0, per_node):
        raise SuiteError(f'{where}: slurm.gpus_per_node must be {per_node} (one GPU per process, '
                         f'{per_node} process(es) per node) or 0 (CPU processes), got {gpus}')
    params['gpus_per_node'] = gpus
    params['cpus_per_task'] = _positive_int(slurm, 'cpus_per_task', where, CPUS_PER_PROCESS * (
        1 if nodes else procs))
    delay = _positive_int(slurm, 'signal_delay_s', where, SIGNAL_DELAY_S)
    if delay >= params['timeout_min'] * 60:
        raise SuiteError(f"{where}: slurm.signal_delay_s ({delay} s) must be shorter than "
                         f"slurm.time ({params['timeout_min']} min)")
    params['slurm_signal_delay_s'] = delay
    if (parallel := _positive_int(slurm, 'array_parallelism', where)) is not None:
        params['slurm_array_parallelism'] = parallel
    for key in ('partition', 'account', 'qos', 'constraint', 'mem'):
        value = slurm.get(key)
        if value is None:
            continue
        if key == 'mem' and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            value = f'{value}G'
        if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value) or (
                key == 'mem' and not re.fullmatch(r'\d+[KMGT]?', value)):
            hint = ("a size such as '64G' or a number of GB" if key == 'mem' else
                    'a name without spaces')
            raise SuiteError(f'{where}: slurm.{key} must be {hint}, got {slurm[key]!r}')
        params[PARAMETERS[key]] = value
    extra = slurm.get('extra') or {}
    if not isinstance(extra, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in extra.items()):
        raise SuiteError(f"{where}: slurm.extra must be a dict of sbatch options without their "
                         f"dashes, e.g. dict(exclusive=True, mail_type='END'), got {extra!r}")
    params['slurm_additional_parameters'] = {'requeue': True, **extra}
    timeouts = _positive_int(slurm, 'max_requeues', where, MAX_REQUEUES, low=0)
    poll = wait_poll_s(slurm)
    if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0.5 <= poll <= 3600:
        raise SuiteError(f'{where}: slurm.poll_s must be a number of seconds from 0.5 to 3600 '
                         f'(how often --wait asks squeue), got {poll!r}')
    return cluster, params, timeouts


def make_executor(folder: Path, slurm: Dict[str, Any], procs: int, name: str,
                  where: str) -> submitit.AutoExecutor:
    """The submitit executor of a suite's array, its parameters set.

    Raises:
        SuiteError: Bad slurm keys, or no SLURM on this machine.
    """
    cluster, params, timeouts = executor_settings(slurm, procs, name, where)
    try:
        executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster,
                                         slurm_max_num_timeout=timeouts,
                                         local_max_num_timeout=timeouts)
    except RuntimeError as err:  # SlurmExecutor without srun
        raise SuiteError(f'--launcher slurm: {err} (submit from a machine of the cluster, or '
                         "set slurm=dict(cluster='local') to run the array here)") from None
    if cluster == 'local':  # its CUDA_VISIBLE_DEVICES: at most the GPUs this machine has
        import torch
        params['local_gpus_per_node'] = min(params['gpus_per_node'], torch.cuda.device_count())
    executor.update_parameters(**params)
    if cluster == 'local':  # not an AutoExecutor parameter of the local executor
        executor._executor.update_parameters(signal_delay_s=params['slurm_signal_delay_s'])
    return executor


# -- the suite's array ------------------------------------------------------------------------------

def run_task(runner, plan: RunPlan, code: Optional[Path] = None) -> RunTask:
    """The task of one plan: its training (always --resume: a requeued task continues) unless
    trained, and the evaluations still to do; run from the snapshot `code` if given."""
    run, python = plan.run, runner.env['PYTHON']
    def where(cmd: List[str]) -> List[str]:
        return in_snapshot(cmd, code) if code is not None else cmd
    ranks = runner.slurm.get('nodes') is not None  # one task per process: a rank's command
    train = None
    if plan.train in ('resume', 'start'):
        cmd = ([python, '-u', str(REPO_ROOT / 'tools' / 'train.py'), resolve_config(run.config),
                '--launcher', 'pytorch', *runner.train_args(plan)] if ranks
               else runner.train_command(plan))
        train = Step('train', where(cmd), str(Path(run.work_dir) / SUITE_TRAIN_LOG))
    evals = [Step(e.name, where(runner.eval_command(run, e, python)),
                  str(Path(run.work_dir) / SUITE_EVAL_LOG.format(e.name)))
             for e in runner.suite.evaluations
             if not e.is_default and plan.evals.get(e.name) == 'todo']
    delay = runner.slurm.get('signal_delay_s') or SIGNAL_DELAY_S
    return RunTask(run.name, train, evals, python,
                   checkpoint_wait_s=max(delay - REQUEUE_MARGIN_S, delay / 2),
                   ranks_in=run.work_dir if ranks else None)


def submitit_folder(runner, plans: List[RunPlan]) -> Path:
    """<work root>/suites/<name>/submitit/%j: submitit's scripts, pickles and logs per task."""
    return Path(plans[0].run.work_dir).parent / SUBMITIT_DIR / '%j'


def _error_line(err: BaseException) -> str:
    """The error a task raised, from submitit's report of it (its traceback's last line)."""
    text = str(err)
    found = re.findall(r'^(?:\w+\.)*\w*(?:Error|Exception): .+$', text, re.M)
    return found[-1] if found else (text.strip().splitlines() or [type(err).__name__])[0]


def _skip(runner, index: int, plan: RunPlan) -> Outcome:
    """A plan without work: done, diverged or queued."""
    run = plan.run
    queued = plan.train == 'queued' or 'queued' in plan.evals.values()
    state = 'queued' if queued else plan.train
    runner.out(f'[{index}/{runner.total}] {run.name}: '
               + (f'queued (SLURM job {plan.job})' if state == 'queued'
                  else 'done (diverged, recorded)' if state == 'diverged'
                  else 'done (records exist)'))
    return Outcome(run, state, job=plan.job)


def _finished(runner, index: int, plan: RunPlan, job, local: bool) -> Outcome:
    """Wait for one task; its outcome."""
    run, log = plan.run, str(job.paths.stdout)
    prefix = f'[{index}/{runner.total}] {run.name}: task {job.job_id}'
    # A task per process (slurm.nodes): rank 0's task speaks for the run. The job's own wait
    # would wait for every task's result, which a task that was killed (its node lost) never
    # writes, and without accounting nothing else says it ended.
    job = job.task(0) if job.num_tasks > 1 else job
    if not local and not wait_task(job, poll_s=wait_poll_s(runner.slurm)):
        runner.out(f'{prefix} -> failed: it left the queue without a result (cancelled, or '
                   f'killed before it wrote one); log {log}')
        return Outcome(run, 'failed', ok=False, log=log, job=job.job_id)
    try:
        result = job.results()[0]
    except Exception as err:  # submitit's FailedJobError / UncompletedJobError
        runner.out(f'{prefix} -> failed: {_error_line(err)}; log {log}')
        return Outcome(run, 'failed', ok=False, log=log, job=job.job_id)
    state = ('diverged' if result['diverged'] else
             {'resume': 'resumed', 'start': 'started'}.get(plan.train, 'done'))
    runner.out(f'{prefix} -> ok ({state})'
               + ''.join(f'; {name} failed, log {path}'
                         for name, path in result['failed_evals'].items()))
    return Outcome(run, state, log=log, failed_evals=dict(result['failed_evals']),
                   job=job.job_id)


def _claim(runner, todo: List[Tuple[int, RunPlan]], outcomes: Dict[int, Outcome],
           claims: List[RunClaim]) -> List[Tuple[int, RunPlan]]:
    """Claim each run with work (the claims go into `claims`) and plan it again under its
    claim: another launch may have submitted it meanwhile. The runs still to submit; the others
    get their outcome (another launch holds the run, or it is queued or done now)."""
    mine = []
    for index, plan in todo:
        Path(plan.run.work_dir).mkdir(parents=True, exist_ok=True)
        claim = RunClaim(plan.run.work_dir)
        holder = claim.take()
        if holder is not None:
            runner.out(f'[{index}/{runner.total}] {plan.run.name}: {holder}; not submitted here')
            outcomes[index] = Outcome(plan.run, 'queued')
            continue
        claims.append(claim)
        plan = runner.replan(plan)
        if plan.has_work:
            mine.append((index, plan))
        else:
            outcomes[index] = _skip(runner, index, plan)
    return mine


def submit_suite(runner, plans: List[RunPlan]) -> List[Outcome]:
    """Submit the plans that have work as one job array (one task per run), record each task's
    job id in its run's work dir, and, with ``runner.wait`` (or cluster 'local'), wait for the
    array and report each task; the outcomes of all plans in order.

    Each run is claimed (`benchmark.suites.claim`) and planned again before it is submitted,
    and noted as being submitted until its job id is recorded (`slurm_queue`), so two launches
    on the same roots submit it once.

    Raises:
        SuiteError: Bad slurm keys or no SLURM here, or squeue failing, before anything is
            submitted.
    """
    todo = [(i, plan) for i, plan in enumerate(plans, 1) if plan.has_work]
    outcomes: Dict[int, Outcome] = {}
    executor = None
    if todo:
        executor = make_executor(submitit_folder(runner, plans), runner.slurm, runner.suite.procs,
                                 runner.suite.name, f'suite {runner.suite.path}')
    for index, plan in enumerate(plans, 1):
        if not plan.has_work:
            outcomes[index] = _skip(runner, index, plan)
    claims: List[RunClaim] = []
    jobs: list = []
    try:
        todo = _claim(runner, todo, outcomes, claims)
        if todo:
            jobs = _submit(runner, plans, todo, executor, outcomes)
    finally:
        for claim in claims:
            claim.give_up()
    if jobs and (executor.cluster == 'local' or runner.wait):
        runner.out(f'waiting for {len(jobs)} task(s)')
        for (index, plan), job in zip(todo, jobs):
            outcomes[index] = _finished(runner, index, plan, job, executor.cluster == 'local')
    return [outcomes[i] for i in sorted(outcomes)]


def _submit(runner, plans: List[RunPlan], todo: List[Tuple[int, RunPlan]], executor,
            outcomes: Dict[int, Outcome]) -> list:
    """Submit the claimed runs as one array; their outcomes; the jobs ([] if refused)."""
    local = executor.cluster == 'local'
    code = snapshot_code(submitit_folder(runner, plans).parent / SNAPSHOT_DIR)
    tasks = []
    for _, plan in todo:
        mark_work_dir(plan.run)
        if not local:  # until its job id is recorded, a second launch sees it as queued
            note_submitting(plan.run.work_dir, runner.suite.name)
        tasks.append(run_task(runner, plan, code))
    path = os.pathsep.join([str(code), *filter(None, [os.environ.get('PYTHONPATH')])])
    try:
        with submitit.helpers.environment_variables(PYTHONPATH=path):
            jobs = executor.submit_array(tasks)
    except Exception as err:  # sbatch refused it (partition, account, limits, ...): its stderr
        lines = [line for line in str(err).splitlines() if line.strip()]
        runner.out(f"submission failed: {lines[-1] if lines else type(err).__name__}")
        for index, plan in todo:
            drop_submitting(plan.run.work_dir)
            outcomes[index] = Outcome(plan.run, 'failed', ok=False,
                                      log=str(submitit_folder(runner, plans).parent))
        return []
    where = 'this machine' if local else 'SLURM'
    runner.out(f'submitted {len(jobs)} task(s) to {where} through submitit '
               f"({'job ' + jobs[0].job_id.split('_')[0] if not local else 'local jobs'}); "
               f'its files in {jobs[0].paths.folder.parent}; its code: {code}')
    for (index, plan), job in zip(todo, jobs):
        if not local:  # the planner asks squeue about it
            record_job(plan.run.work_dir, job.job_id)
        what = {'resume': 'resume', 'start': 'start'}.get(plan.train, 'evaluations')
        runner.out(f'[{index}/{runner.total}] {plan.run.name}: submitted as task {job.job_id} '
                   f'({what}); log {job.paths.stdout}')
        outcomes[index] = Outcome(plan.run, 'submitted', log=str(job.paths.stdout),
                                  job=job.job_id)
    return jobs
