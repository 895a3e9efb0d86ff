"""What a suite still has to do: per run, train (start, resume) or not, and which evaluations.

A step is done when a record with the run's config hash, seed and evaluation exists (records
carry ``config_sha256`` of ``config_identity`` and ``seed``). A run whose work dir holds
checkpoints but no record resumes; a run with a SLURM job still queued or running waits; the
rest start. So a killed suite restarted with the same command redoes nothing that finished.
"""
from __future__ import annotations

import json
import os.path as osp
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from benchmark.atomic_io import atomic_write_text
from benchmark.engine.checkpoints import checkpoint_candidates
from benchmark.suites.budget import budget_text
from benchmark.suites.spec import Evaluation, Run, Suite, SuiteError
from benchmark.layout import SUITE_RUN_FILE, epoch_checkpoint
from benchmark.names import canonical_data
from benchmark.suites.slurm_queue import queued_job

# Training: 'done' (records or final checkpoint), 'diverged' (a diverged record: nothing more
# to do), 'queued' (its SLURM job is pending or running), 'resume', 'start'.
TRAIN_STATES = ('done', 'diverged', 'queued', 'resume', 'start')
# An evaluation: 'done', 'todo', 'skip' (the run diverged) or 'queued'.
EVAL_STATES = ('done', 'todo', 'skip', 'queued')

Records = Dict[Tuple[str, int], List[dict]]


@dataclass
class RunPlan:
    """One run's decisions."""

    run: Run
    train: str
    evals: Dict[str, str] = field(default_factory=dict)  # evaluation name -> state
    checkpoint: Optional[str] = None  # what a resume continues from
    job: Optional[str] = None  # the SLURM job id it waits for

    @property
    def has_work(self) -> bool:
        return self.train in ('resume', 'start') or 'todo' in self.evals.values()


def index_records(records: Iterable[dict]) -> Records:
    """Records by (config_sha256, seed)."""
    index: Records = {}
    for record in records:
        if record.get('config_sha256'):
            index.setdefault((record['config_sha256'], int(record['seed'])), []).append(record)
    return index


def run_records(records: Records, run: Run) -> List[dict]:
    """The records of `run`: its config hash and seed, and its method (a random-init encoder
    or an external checkpoint evaluated with the same config is not the run), and its setting
    where both have one (the config hash leaves out the number of processes: a record of the
    same config run with another number, e.g. under --procs, is another setting's)."""
    return [r for r in records.get((run.config_sha256, run.seed), [])
            if r.get('method') == run.info['method']
            and (not r.get('setting_sha256') or not run.setting_sha256
                 or r['setting_sha256'] == run.setting_sha256)]


def evaluation_done(records: List[dict], evaluation: Evaluation, pretrain_data: str) -> bool:
    """A record of the run holds every protocol of `evaluation` on its data, status ok."""
    data = canonical_data(evaluation.eval_data or pretrain_data)
    return any(r.get('status') == 'ok' and canonical_data(r['eval_data']) == data
               and set(evaluation.protocols) <= set(r['protocols']) for r in records)


def check_work_dir(run: Run) -> None:
    """Refuse a work dir whose checkpoints come from another config or another number of
    processes per run (a resume would mix them)."""
    marker = Path(run.work_dir) / SUITE_RUN_FILE
    if not marker.is_file() or not checkpoint_candidates(run.work_dir):
        return
    try:
        noted = json.loads(marker.read_text())
        started, procs = noted.get('config_sha256'), noted.get('procs')
    except (OSError, ValueError, AttributeError):
        return
    now = run.info.get('world_size')
    if procs and now and procs != now:
        raise SuiteError(f'run {run.name}: {run.work_dir} holds checkpoints of {procs} '
                         f'process(es) per run, now {now}: give this setting its own '
                         '--work-root (and --results-root), or move that folder away')
    if started and started != run.config_sha256:
        raise SuiteError(f'run {run.name}: {run.work_dir} holds checkpoints of another config '
                         f'(config_sha256 {started[:12]}, now {run.config_sha256[:12]}): the '
                         'config or the suite changed; move that folder away or restore the config')


def mark_work_dir(run: Run) -> None:
    """Note in the work dir which config its checkpoints belong to."""
    Path(run.work_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(str(Path(run.work_dir) / SUITE_RUN_FILE), json.dumps(
        dict(run=run.name, config=run.config, seed=run.seed, config_sha256=run.config_sha256,
             procs=run.info.get('world_size'), variant=run.variant_label,
             cfg_options=run.option_args), indent=1) + '\n')


def plan_run(run: Run, suite: Suite, records: Records,
             queued: Callable[[str, str], Optional[str]] = queued_job) -> RunPlan:
    """The decisions for one run from its records, its work dir and its SLURM job
    (`queued(work dir, suite name)`: the job it waits for, or None).

    Raises:
        SuiteError: A work dir of another setting, or squeue failing (`slurm_queue`).
    """
    check_work_dir(run)
    mine = run_records(records, run)
    extra = [e for e in suite.evaluations if not e.is_default]
    if any(r.get('status') == 'diverged' for r in mine):
        return RunPlan(run, 'diverged', {e.name: 'skip' for e in extra})
    data = run.info['pretrain_data']
    if suite.wants_default:
        trained = evaluation_done(mine, Evaluation('default', _default(suite)), data)
    else:
        trained = osp.isfile(epoch_checkpoint(run.work_dir, run.max_epochs))
    evals = {e.name: 'done' if evaluation_done(mine, e, data) else 'todo' for e in extra}
    try:
        job = queued(run.work_dir, suite.name) if not trained or 'todo' in evals.values() else None
    except SuiteError as err:  # squeue failing: unknown, never "not queued"
        raise SuiteError(f'run {run.name}: {err}') from None
    if job:
        return RunPlan(run, 'done' if trained else 'queued',
                       {k: 'queued' if v == 'todo' else v for k, v in evals.items()}, job=job)
    if trained:
        return RunPlan(run, 'done', evals)
    candidates = checkpoint_candidates(run.work_dir)
    if candidates:
        return RunPlan(run, 'resume', evals, checkpoint=candidates[0])
    return RunPlan(run, 'start', evals)


def _default(suite: Suite) -> tuple:
    return next(e.protocols for e in suite.evaluations if e.is_default)


def plan_suite(suite: Suite, records: Iterable[dict],
               queued: Callable[[str, str], Optional[str]] = queued_job) -> List[RunPlan]:
    """The decisions for every run of the suite."""
    index = index_records(records)
    return [plan_run(run, suite, index, queued) for run in suite.runs]


def describe_plan(plan: RunPlan) -> str:
    """'train: resume (from epoch_3.pth); linear_paper: todo' for the plan's line."""
    train = {'done': 'skip (done)', 'diverged': 'skip (diverged, recorded)', 'start': 'start',
             'queued': f'queued (SLURM job {plan.job})',
             'resume': f'resume from {osp.basename(plan.checkpoint or "")}'}[plan.train]
    parts = [f'train: {train}'] + [f'{name}: {state}' for name, state in plan.evals.items()]
    return '; '.join(parts)


def plan_lines(suite: Suite, plans: List[RunPlan]) -> List[str]:
    """The plan as printed by --dry-run: one line per run and a count per decision."""
    width = max(len(p.run.name) for p in plans)
    lines = [f'[{i}/{len(plans)}] {p.run.name:<{width}}  {describe_plan(p)}'
             + (f'  [{p.run.variant_label}]' if p.run.variant_label else '')
             + (f'\n      {budget_text(p.run.budget)}' if p.run.budget else '')
             for i, p in enumerate(plans, 1)]
    counts = {state: sum(p.train == state for p in plans) for state in TRAIN_STATES}
    todo = sum(v == 'todo' for p in plans for v in p.evals.values())
    words = dict(done='skip (done)', diverged='skip (diverged)', queued='wait (queued)')
    lines.append('plan: ' + ', '.join(f'{n} {words.get(s, s)}' for s, n in counts.items() if n)
                 + f'; {todo} evaluation(s) to run')
    return lines
