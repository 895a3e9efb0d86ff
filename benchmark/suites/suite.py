"""One command for a suite: expand, plan, (dry run: print the plan), run, render, summarise.

``tools/run_suite.py`` parses its arguments and calls `run_suite`; the steps live in
``spec`` (the file and its runs) and ``policy`` (its statistics keys), ``plan`` (what is left to
do), ``runner`` with ``claim``, ``process``, ``status`` and ``outcome`` (local execution),
``slurm`` (SLURM through submitit), ``report`` (the leaderboard) and ``publish`` (a page's
block).
"""
from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from mmengine.registry import DATASETS

from benchmark.suites.plan import RunPlan, plan_lines, plan_suite
from benchmark.suites.report import read_suite_records, render_suite
from benchmark.engine.preemption import PREEMPTED_EXIT_CODE
from benchmark.suites.outcome import summary_line
from benchmark.suites.publish import check_page, publish
from benchmark.reports.suite_board import SUITE_SUMMARY
from benchmark.suites.runner import SuiteRunner
from benchmark.suites.spec import Suite, SuiteError, expand_suite, read_suite
from benchmark.layout import suite_config
from benchmark.names import DATA_TYPES


def select(suite: Suite, pattern: Optional[str]) -> List[str]:
    """Names of the runs `--only PATTERN` picks: a glob, or a substring when it has no * ? [."""
    names = [run.name for run in suite.runs]
    if not pattern:
        return names
    glob = pattern if any(c in pattern for c in '*?[') else f'*{pattern}*'
    picked = [n for n in names if fnmatch.fnmatchcase(n, glob)]
    if not picked:
        raise SuiteError(f'--only {pattern!r} matches none of the {len(names)} runs '
                         f"(e.g. {', '.join(names[:3])})")
    return picked


def check_data_roots(suite: Suite, plans: List[RunPlan]) -> None:
    """Every data root a step of `plans` reads exists with its layout, before anything starts."""
    for plan in plans:
        run = plan.run
        try:
            if plan.train in ('start', 'resume'):
                DATASETS.get(run.dataset['type']).check_root(run.dataset['data_root'], 'train')
            for evaluation in suite.evaluations:
                if plan.evals.get(evaluation.name) == 'todo' and evaluation.eval_data:
                    DATASETS.get(DATA_TYPES[evaluation.eval_data]).check_root(
                        evaluation.data_root or '', 'val')
        except FileNotFoundError as err:
            raise SuiteError(f'run {run.name}: {err}') from None


def run_suite(path: str, dry_run: bool = False, only: Optional[str] = None,
              launcher: str = 'local', seeds: Optional[Sequence[int]] = None,
              results_root: str = 'results', work_root: str = 'work_dirs',
              partition: Optional[str] = None, paper: Optional[Path] = None,
              use_wandb: bool = True, out: Callable[..., None] = print,
              publish_to: Optional[str] = None, wait: bool = False, parallel: int = 1,
              procs: Optional[int] = None) -> int:
    """Run a suite; the exit status (0 all ok, 1 some step failed, 143 interrupted).
    `publish_to`: a Markdown page whose block of this suite receives its summary. `wait`: with
    the SLURM launcher, wait for the submitted array to end before rendering.
    `parallel`: local runs at once; `procs`: processes per run instead of the suite's.

    Raises:
        SuiteError: A bad suite file, option, config or data root (before anything starts).
    """
    suite = expand_suite(str(suite_config(path)), seeds, results_root, work_root, procs)
    if publish_to:
        try:
            check_page(publish_to, suite.name)
        except ValueError as err:
            raise SuiteError(str(err)) from None
    chosen = set(select(suite, only))
    runner = SuiteRunner(suite, launcher, partition, out=out,  # checks the launcher's settings
                         parallel=parallel, wait=wait)
    plans = plan_suite(suite, read_suite_records(suite.record_dirs))
    mine = [p for p in plans if p.run.name in chosen]
    variants = len({(r.config, r.variant_label) for r in suite.runs})
    out(f'suite {suite.name}: {len(suite.runs)} runs ({variants} config/variant(s) x '
        f'{len(suite.seeds)} seed(s)), {suite.procs} process(es) each, launcher {launcher}'
        + (f', {parallel} runs at a time' if parallel > 1 else '') + '; '
        f'records in {suite.results_dir}/runs'
        + (f'; --only {only!r}: {len(mine)} run(s)' if only else ''))
    for note in suite.notes:
        out(f'note: {note}')
    if procs is not None and procs != read_suite(suite.path).get('procs', 1):
        out(f'note: --procs {procs} is another setting than the suite file\'s (total batch; '
            'a MoCo-family run in one process splits its key batch for BatchNorm); its runs '
            'keep their names and work dirs: give them their own --work-root and --results-root')
    if dry_run:
        for line in plan_lines(suite, mine):
            out(line)
        return 0
    check_data_roots(suite, mine)
    outcomes = runner.run(mine)
    interrupted = runner.interrupted is not None
    paths = render_suite(suite, plans, outcomes, paper, use_wandb=use_wandb and not interrupted)
    out(f'summary: {summary_line(outcomes, len(mine), interrupted)}')
    out(f"leaderboard: {paths[0]} (and {', '.join(p.name for p in paths[1:])})")
    if publish_to and not interrupted:
        written = publish(publish_to, suite.name, Path(suite.results_dir) / SUITE_SUMMARY)
        out(f"published: {', '.join(str(p) for p in written)}")
    if launcher == 'slurm' and any(o.state == 'submitted' for o in outcomes):
        out('jobs submitted: rerun the same command when they have finished; it submits '
            'nothing that is queued or done and renders the leaderboard again')
    if interrupted:
        return PREEMPTED_EXIT_CODE
    failed = any(not o.ok or o.failed_evals for o in outcomes)
    return 1 if failed else 0
