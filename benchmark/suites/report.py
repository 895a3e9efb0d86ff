"""A suite's leaderboard from its records: join records to runs, write the page, CSV and
curves under ``results/suites/<name>/``, and the same table to a wandb run when wandb is on.

Records are joined to the suite's runs by (config_sha256, seed), so a run's variant labels its
rows and records of other configs in the folder are left out. A step without a record shows
as a row with status failed (it failed now), queued (its SLURM job waits) or missing.
"""
from __future__ import annotations

import csv
import datetime
import io
import sys
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from benchmark.atomic_io import atomic_write_text
from benchmark.engine.tracking import (probe_wandb_server, wandb_missing, wandb_mode,
                                       wandb_server_and_key)
from benchmark.suites.plan import RunPlan, index_records, run_records
from benchmark.suites.outcome import Outcome
from benchmark.suites.spec import Evaluation, Suite
from benchmark.suites.until_decided import read_state
from benchmark.layout import SEQUENTIAL_FILE, SUITE_CURVES, display_path, leaderboard_paths
from benchmark.names import RANDOM_INIT, canonical_data, method_label
from benchmark.reports.comparisons import main_metric
from benchmark.reports.compute import regime_free
from benchmark.reports.aggregate_board import aggregate_figures
from benchmark.reports.explorer import render_explorer
from benchmark.reports.figures import draw, drawn
from benchmark.reports.interval_plot import section_figures
from benchmark.reports.leaderboard import build_rows, row_label
from benchmark.reports.records import load_records
from benchmark.reports.render import read_paper
from benchmark.reports.sequential import summary_lines
from benchmark.reports.suite_board import (CLASSIFICATION_PROTOCOLS, SUITE_SUMMARY, hardware,
                                           monitor_series, paper_beside_ours, plot_monitor_curves,
                                           summary_markdown, suite_markdown)
from benchmark.reports.tables import render_csv, render_markdown
from benchmark.reports.verdicts import verdicts


def read_suite_records(results_dirs: Union[str, List[str]]) -> List[dict]:
    """The records of a suite's results folder (and of the suites it reuses), oldest first; a
    broken one is a warning line, not a stop."""
    dirs = [results_dirs] if isinstance(results_dirs, str) else results_dirs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        records = [r for folder in dirs for r in load_records(folder)]
    for warning in caught:
        print(f'warning: {warning.message}', file=sys.stderr)
    return sorted(records, key=lambda r: (r['created'], r['id']))


def _newest_per_step(records: List[dict]) -> List[dict]:
    """Each (config, seed, method, eval data, protocol) once, from its newest record: a seed
    evaluated twice must not count twice."""
    seen, out = set(), []
    for record in sorted(records, key=lambda r: (r['created'], r['id']), reverse=True):
        key = (record['config_sha256'], record['seed'], record['method'],
               canonical_data(record['eval_data']))
        protocols = {p: e for p, e in record['protocols'].items() if key + (p,) not in seen}
        seen.update(key + (p,) for p in protocols)
        if protocols:
            out.append(dict(record, protocols=protocols))
    return out


def _placeholder(suite: Suite, plan: RunPlan, evaluation: Evaluation, status: str,
                 reason: str) -> dict:
    """A stand-in record (never written) for a step without a record, so its row shows."""
    info, run = plan.run.info, plan.run
    protocols = {p: dict(settings={}, metrics={main_metric(p)[0]: f'NA({reason})'})
                 for p in evaluation.protocols}
    batch = info['total_batch'] or None
    return dict(id=f'no-record-{run.name}', created='', placeholder=True, setting_sha256=run.setting_sha256,
                overrides=run.overrides, config=info.get('config'), world_size=suite.procs,
                method=info['method'], backbone=info['backbone'],
                pretrain_data=info['pretrain_data'], pretrain_epochs=run.max_epochs,
                eval_data=evaluation.eval_data or info['pretrain_data'],
                protocols=protocols, seed=run.seed, status=status, variant=run.variant_label,
                time_s_per_epoch=None, peak_memory_gb=None, total_batch=batch)


def suite_records(suite: Suite, plans: List[RunPlan], records: List[dict],
                  outcomes: Dict[str, Outcome]) -> List[dict]:
    """The suite's records with ``variant`` set, plus stand-ins for its steps without one, plus
    reference encoders evaluated into its folder (``tools/eval.py CONFIG random``)."""
    records = _newest_per_step(records)
    index = index_records(records)
    out = [r for r in records if r['method'] == RANDOM_INIT]
    for plan in plans:
        run = plan.run
        mine = run_records(index, run)
        out += [dict(r, variant=run.variant_label) for r in mine]
        if any(r['status'] == 'diverged' for r in mine):
            continue
        outcome = outcomes.get(run.name)
        for evaluation in suite.evaluations:
            data = canonical_data(evaluation.eval_data or run.info['pretrain_data'])
            have = {p for r in mine if r['status'] == 'ok'
                    and canonical_data(r['eval_data']) == data for p in r['protocols']}
            if set(evaluation.protocols) <= have:
                continue
            status, reason = _missing_status(outcome, plan, evaluation)
            out.append(_placeholder(suite, plan, evaluation, status, reason))
    return out


def equal_compute_records(plans: List[RunPlan], records: List[dict]) -> List[dict]:
    """The records of the runs at the suite's budget (`budget.budget_runs`) as one experiment:
    each placed at the budget's baseline epochs and without the overrides that set its epochs
    and schedule (its variant still names them), so each method's rows are compared with the
    baseline's at the same training FLOPs by the same tests, families, Holm and verdicts."""
    index = index_records(_newest_per_step(records))
    out = []
    for plan in plans:
        budget = plan.run.budget
        if not budget:
            continue
        for record in run_records(index, plan.run):
            out.append(dict(record, overrides=regime_free(record.get('overrides')),
                            variant=plan.run.variant_label,
                            pretrain_epochs=budget['baseline_epochs']))
    return out


def equal_compute_board(plans: List[RunPlan], records: List[dict], policy) -> Optional[dict]:
    """The comparison at equal training compute, the one place the page, the summary and the
    explorer take it from (None for a suite without a budget or without its records yet):
    ``rows`` (`build_rows` of `equal_compute_records`), ``verdicts`` (their sentences),
    ``intro`` (what the regime is), ``flops`` (the budget's training FLOPs) and
    ``equal_epochs`` (the epochs of the suite's runs at equal epochs)."""
    budget = next((p.run.budget for p in plans if p.run.budget), None)
    chosen = equal_compute_records(plans, records)
    if not budget or not chosen:
        return None
    rows = build_rows(chosen, (), policy)
    epochs = {f"{method_label(p.run.info['method'])} {p.run.max_epochs}": None
              for p in plans if p.run.budget}
    intro = (f"Each method at the whole number of epochs whose training FLOPs come nearest those "
             f"of {budget['baseline']} at {budget['baseline_epochs']} epochs "
             f"({', '.join(epochs)}; the sections are titled with the baseline's epochs): the "
             'same paired tests, families, Holm and verdicts as above.')
    own = sorted({p.run.max_epochs for p in plans if not p.run.budget})
    return dict(rows=rows, verdicts=verdicts(rows, CLASSIFICATION_PROTOCOLS), intro=intro,
                flops=budget['flops'], equal_epochs=own or [budget['baseline_epochs']])


def board_lines(board: Optional[dict]) -> List[str]:
    """The page's section at equal training compute (`equal_compute_board`; [] without one):
    its verdicts, then its tables."""
    if not board:
        return []
    tables = render_markdown(board['rows'], '', legend=False).split('\n', 1)[1]
    return (['', '## At equal training compute', '', board['intro'], '']
            + [f'- {v}' for v in board['verdicts']] + [tables])


def equal_compute_lines(plans: List[RunPlan], records: List[dict], policy) -> List[str]:
    """The page's section at equal training compute ([] for a suite without a budget): its
    verdicts, then its tables."""
    return board_lines(equal_compute_board(plans, records, policy))


def _missing_status(outcome: Optional[Outcome], plan: RunPlan,
                    evaluation: Evaluation) -> Tuple[str, str]:
    if outcome is not None and outcome.state in ('submitted', 'queued') or plan.train == 'queued':
        return 'queued', f'SLURM job {(outcome and outcome.job) or plan.job}'
    if outcome is not None and not outcome.ok and outcome.state == 'failed':
        return 'failed', f'training failed; log {outcome.log}'
    if outcome is not None and evaluation.name in outcome.failed_evals:
        return 'failed', f'evaluation failed; log {outcome.failed_evals[evaluation.name]}'
    return 'missing', 'no record yet'


def _run_rows(plans: List[RunPlan], outcomes: Dict[str, Outcome]) -> List[Dict[str, str]]:
    rows = []
    for plan in plans:
        outcome = outcomes.get(plan.run.name)
        state = outcome.state if outcome else 'not run'
        if outcome and outcome.failed_evals:
            state += f" ({', '.join(outcome.failed_evals)} failed)"
        rows.append(dict(run=plan.run.name, variant=plan.run.variant_label or 'default',
                         seed=str(plan.run.seed), state=state,
                         log=(outcome.log if outcome else '') or ''))
    return rows


def render_suite(suite: Suite, plans: List[RunPlan], outcomes: List[Outcome],
                 paper: Optional[Path], use_wandb: bool = True,
                 sequential: bool = False) -> List[Path]:
    """Write the suite's page (leaderboard.md), leaderboard.csv, summary.md (the compact block
    `--publish` puts into a page), the explorer (index.html), the interval plots and
    curves.png; return their paths.
    `sequential`: add the decisions of ``--until-decided`` (its state file) to the page and
    the summary."""
    by_name = {o.run.name: o for o in outcomes}
    found = read_suite_records(suite.record_dirs)
    records = suite_records(suite, plans, found, by_name)
    rows = paper_beside_ours(build_rows(records, read_paper(paper) if paper else (), suite.policy))
    folder = Path(suite.results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    groups: Dict[str, list] = {}
    for plan in plans:
        folder_of_run = next((d for d in suite.work_dirs(plan.run) if Path(d).is_dir()),
                             plan.run.work_dir)
        series = monitor_series(folder_of_run)
        if series:
            groups.setdefault(row_label(plan.run.info['method'], plan.run.variant_label),
                              []).append(series)
    curves = folder / SUITE_CURVES
    has_curves = draw('the monitor curves', curves,
                      lambda: plot_monitor_curves(groups, str(curves)))
    md, csv_path = leaderboard_paths(str(folder))
    meta = dict(name=suite.name, file=display_path(suite.path), seeds=suite.seeds, procs=suite.procs,
                cfg_options=', '.join(f'{k}={v}' for k, v in suite.cfg_options.items()),
                evaluations=', '.join(e.name for e in suite.evaluations))
    generated = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    figures = {**section_figures(rows, str(folder)), **aggregate_figures(rows, str(folder))}
    said = verdicts(rows, CLASSIFICATION_PROTOCOLS)
    board = equal_compute_board(plans, found, suite.policy)
    at_budget = '\n'.join(board_lines(board))
    block = ''
    state = folder / SEQUENTIAL_FILE
    if sequential and state.is_file():  # --until-decided's decisions, look by look
        block = '\n' + '\n'.join(summary_lines(read_state(state), method_label))
    atomic_write_text(str(md), suite_markdown(meta, rows, _run_rows(plans, by_name), generated,
                                              f'{display_path(folder)}/runs/*.json',
                                              SUITE_CURVES if has_curves is True
                                              else has_curves or '',
                                              figures=figures, verdicts=said) + block
                      + at_budget)
    summary = folder / SUITE_SUMMARY
    atomic_write_text(str(summary), summary_markdown(meta, rows, said, figures, generated,
                                                     hardware(found)) + block + at_budget)
    csv_text = render_csv(rows)
    atomic_write_text(str(csv_path), csv_text)
    explorer = render_explorer(rows, csv_text, folder, suite.record_dirs, f'Suite {suite.name}',
                               generated, equal_compute=board)
    paths = ([md, csv_path, summary, explorer] + [folder / name for name in drawn(figures)]
             + ([curves] if has_curves is True else []))
    if use_wandb:
        log_suite_to_wandb(suite.name, csv_text, curves if has_curves is True else None, folder)
    return paths


def log_suite_to_wandb(name: str, csv_text: str, curves: Optional[Path],
                       folder: Path) -> Optional[str]:
    """The leaderboard as a wandb Table (and the curves) in a run of job type 'suite'.

    Mode as for training runs (``tracking.wandb_mode``): online with credentials and a server
    that answers, else offline under `folder` with one warning; WANDB_MODE=disabled: nothing.
    The files on disk never depend on it. Returns the run's directory, or None.
    """
    mode, warning = wandb_mode()
    if mode == 'disabled':
        return None
    try:
        import wandb
    except ImportError:
        print(wandb_missing("the suite's leaderboard goes to its files only"), file=sys.stderr)
        return None
    if mode == 'online':
        problem = probe_wandb_server(*wandb_server_and_key({}))
        if problem:
            mode, warning = 'offline', f'warning: wandb could not start online ({problem}); offline'
    if warning:
        print(warning, file=sys.stderr)
    rows = list(csv.reader(io.StringIO(csv_text)))
    try:
        run = wandb.init(project='mixco-bench', name=f'suite-{name}', job_type='suite',
                         dir=str(folder), mode=mode, config=dict(suite=name))
        run.log({'suite/leaderboard': wandb.Table(columns=rows[0], data=rows[1:]),
                 **({'suite/curves': wandb.Image(str(curves))} if curves else {})})
        run.finish()
    except Exception as err:  # noqa: BLE001 - wandb must never stop the tables
        print(f'warning: wandb: the suite table was not logged ({type(err).__name__}: '
              f'{str(err).splitlines()[0] if str(err) else ""})', file=sys.stderr)
        return None
    return str(run.dir)
