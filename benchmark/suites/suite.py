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
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mmengine.registry import DATASETS

from benchmark.suites.budget import save_costs
from benchmark.suites.plan import RunPlan, plan_lines, plan_suite
from benchmark.suites.report import read_suite_records, render_suite
from benchmark import stop
from benchmark.exit_codes import PREEMPTED_EXIT_CODE
from benchmark.suites.outcome import summary_line
from benchmark.suites.publish import check_page, publish
from benchmark.reports.suite_board import SUITE_SUMMARY
from benchmark.suites.runner import SuiteRunner
from benchmark.suites.spec import Suite, SuiteError, expand_suite, read_suite
from benchmark.suites import until_decided as seq
from benchmark.reports import sequential
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


def block_name(suite: Suite, until_decided: bool = False) -> str:
    """The name of the suite's block in a page (its markers, its figures' prefix): the suite's
    name; with --until-decided '<name>_until_decided', so that the same suite's fixed-seed
    block elsewhere keeps its own figures."""
    return f'{suite.name}_until_decided' if until_decided else suite.name


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
              procs: Optional[int] = None, until_decided: Optional[Tuple[int, int]] = None
              ) -> int:
    """Run a suite; the exit status (0 all ok, 1 some step failed, 130 or 143 stopped by
    SIGINT or SIGTERM, 143 a run pre-empted).
    `publish_to`: a Markdown page whose block of this suite receives its summary. `wait`: with
    the SLURM launcher, wait for the submitted array to end before rendering.
    `parallel`: local runs at once; `procs`: processes per run instead of the suite's.
    `until_decided`: (max seeds, seeds per round): train seeds in rounds until the primary
    family is decided (`benchmark.suites.until_decided`) instead of the suite's seeds.

    Raises:
        SuiteError: A bad suite file, option, config or data root (before anything starts).
    """
    suite = expand_suite(str(suite_config(path)), seeds, results_root, work_root, procs)
    if publish_to:
        try:
            check_page(publish_to, block_name(suite, until_decided is not None))
        except ValueError as err:
            raise SuiteError(str(err)) from None
    if until_decided is not None:
        if seeds or only:
            raise SuiteError('--until-decided chooses the seeds itself: drop --seeds and --only')
        if launcher == 'slurm' and not wait:
            raise SuiteError('--until-decided with --launcher slurm needs --wait: each look '
                             'waits for the runs of its round')
        return _until_decided(suite, until_decided, dict(
            results_root=results_root, work_root=work_root, procs=procs, launcher=launcher,
            partition=partition, out=out, parallel=parallel, wait=wait), dry_run, paper,
            use_wandb, publish_to)
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
    if suite.budget:  # the step counts the epochs came from: a rerun plans the same
        save_costs(suite.results_dir, suite.costs)
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
        return stop.exit_code(runner.interrupted)  # 130 Ctrl-C, 143 SIGTERM
    failed = any(not o.ok or o.failed_evals for o in outcomes)
    return 1 if failed else 0


def _until_decided(suite: Suite, limits: Tuple[int, int], how: Dict[str, Any], dry_run: bool,
                   paper: Optional[Path], use_wandb: bool, publish_to: Optional[str]) -> int:
    """`run_suite --until-decided`: the looks still to take, then the table of every seed
    trained (with the design's block), published where asked."""
    out = how['out']
    max_seeds, round_size = limits
    methods = {run.info['method'] for run in suite.runs if not run.variant}
    path = seq.state_path(suite.results_dir)
    outcomes: list = []
    failed: List[str] = []
    stopped: List[int] = []  # the signal that stopped the suite here

    def records() -> List[dict]:
        return read_suite_records(suite.record_dirs)

    def expanded(seeds: List[int]) -> Suite:
        return expand_suite(suite.path, seeds, how['results_root'], how['work_root'],
                            how['procs'])

    def train(need: set, seeds: List[int]) -> bool:
        now = expanded(seeds)
        runner = SuiteRunner(now, how['launcher'], how['partition'], out=out,
                             parallel=how['parallel'], wait=how['wait'])
        plans = [p for p in plan_suite(now, read_suite_records(now.record_dirs))
                 if p.run.info['method'] in need and not p.run.variant]
        check_data_roots(now, plans)
        done = runner.run(plans)
        outcomes.extend(done)
        if runner.interrupted is not None:
            stopped.append(runner.interrupted)
        if runner.interrupted is not None or any(o.state == 'interrupted' for o in done):
            return False  # stopped (here, or a run pre-empted): its runs resume next time
        failed.extend(o.run.name for o in done if not o.ok or o.failed_evals)
        return not failed

    out(f'suite {suite.name}: until decided, at most {max_seeds} seeds per method, '
        f'{round_size} per round; methods {", ".join(sorted(methods))}; design and looks in {path}')
    if dry_run:
        state = seq.read_state(path)
        if state:
            seq.check_design(state, max_seeds, round_size, path, methods, suite.policy.alpha)
        state = state or seq.make_state(
            records, train, methods, suite.seeds, suite.policy, max_seeds, round_size, out,
            dry_run=True)
        if state is None:
            out(f'no record of every method yet: the first round trains seeds '
                f'{seq.seed_sequence(suite.seeds, min(suite.policy.min_seeds, max_seeds))} of '
                'each method, then the design is fixed from the family it finds')
            return 0
        have = max([look['seeds'] for look in state['looks']], default=0)
        for line in sequential.plan_lines(sequential.design_from(state['design']),
                                          len(methods), have or seq.recorded_seeds(
                                              records(), methods, suite.seeds)):
            out(line)
        return 0
    state = seq.until_decided(path, records, train, methods, suite.seeds, suite.policy,
                              max_seeds, round_size, out)
    trained = max([look['seeds'] for look in state.get('looks', [])], default=0)
    final = expanded(seq.seed_sequence(suite.seeds, max(trained, 1)))
    plans = [p for p in plan_suite(final, records()) if p.train in ('done', 'diverged')
             and not p.run.variant]
    interrupted = bool(state.get('interrupted')) and not failed
    paths = render_suite(final, plans, outcomes, paper, use_wandb=use_wandb and not interrupted,
                         sequential=True)
    out(f"leaderboard: {paths[0]} (and {', '.join(p.name for p in paths[1:])})")
    if failed:
        out(f"run(s) failed: {', '.join(failed)}; the design waits at its next look: fix them "
            'and run the same command again')
        return 1
    if interrupted:
        out(f"interrupted: {len(state.get('looks', []))} look(s) taken; run the same command "
            'to continue the design (the round\'s runs resume)')
        return stop.exit_code(stopped[-1]) if stopped else PREEMPTED_EXIT_CODE
    if publish_to:
        written = publish(publish_to, block_name(suite, True),
                          Path(suite.results_dir) / SUITE_SUMMARY)
        out(f"published: {', '.join(str(p) for p in written)}")
    return 0
