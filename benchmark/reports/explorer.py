"""The explorer: ``index.html`` beside ``leaderboard.md``, one self-contained page (its data
embedded as JSON, its script and styles inline, nothing fetched, opens from file://) made from
the same rows the CSV is made from.

The page (``explorer_assets/``: the HTML frame, the script, the styles) shows a table of the rows
with filters and sortable columns; per row its seeds as points on its interval and, where it
has a baseline, the paired Δ with its interval, the test, the verdict and the family, and its
compute: time per epoch, peak memory, encoder passes and GFLOP per training image (a training
step counted when the run was evaluated; '—' for records without the count) and the hardware;
a row opens its detail (per-seed values and paired differences, overrides and protocol
settings, the compute, commit and versions, relative links to each run's record, report,
curves and t-SNE figure). Per section it draws the aggregates across tasks, the performance
profile and the rows' accuracy against their GFLOP per image, encoder passes, time per epoch
or peak memory.

A suite with a ``budget`` (`explorer_data`'s `equal_compute`: the suite's
``equal_compute_board``, the one place its leaderboard takes the comparison from) gets a section
at equal training compute after them: the same verdict sentences and each method's row against
the baseline on the budget (paired Δ, test, Holm, verdict, family, training compute), and
accuracy against each row's total training FLOPs, each method's point at equal epochs and at
equal compute joined by a line; rows whose records hold no count say 'not counted' and are left
out of the plot.

`explorer_data` is what the page embeds: ``rows`` holds each row's CSV line exactly as
``leaderboard.csv`` holds it (strings, as read back, in the order of ``columns``), beside what
the detail shows; the package versions that many seeds share are in ``shared``,
named by their index.
"""
from __future__ import annotations

import csv
import html
import io
import json
import os.path as osp
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from benchmark.atomic_io import atomic_write_text
from benchmark.layout import REPORT, record_path, run_folder
from benchmark.names import METRIC_FORMATS, RANDOM_INIT, PROTOCOLS, method_label
from benchmark.reports.aggregate_board import (method_lines, profiles, section_min_seeds,
                                               section_tasks, task_label)
from benchmark.reports.comparisons import SECTION, SUITE, main_metric
from benchmark.reports.compute import compute_text, flop_text, regime_free
from benchmark.reports.leaderboard import common_overrides, override_text, row_label, section_title
from benchmark.reports.tables import render_csv, sections

ASSETS = Path(__file__).with_name('explorer_assets')
EXPLORER = 'index.html'
PROFILE_POINTS = 61
Row = Dict[str, Any]


def _relative(path: Path, folder: Path) -> str:
    return Path(osp.relpath(path.resolve(), folder.resolve())).as_posix()


def run_links(run: Dict[str, Any], record_dirs: Sequence[str], folder: Path) -> Dict[str, str]:
    """Links, relative to `folder`, to the files of one run that exist: its record, report,
    curves and t-SNE figure (found under the record's folder, as the run report finds it)."""
    if not run['id']:
        return {}
    for results in record_dirs:
        record = record_path(str(results), run['id'])
        if record.is_file():
            break
    else:
        return {}
    own = run_folder(str(results), run['id'])
    links = {'record': record, 'report': own / REPORT, 'curves': own / 'curves.png'}
    if run['figure']:
        links['t-SNE'] = next((p for p in (Path(run['figure']), own / osp.basename(run['figure']))
                               if p.is_file()), own / osp.basename(run['figure']))
    return {name: _relative(path, folder) for name, path in links.items() if path.is_file()}


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _detail(row: Row, record_dirs: Sequence[str], folder: Path,
            links: Dict[str, Dict[str, str]]) -> Dict[str, Any]:
    """A row's detail; `links`: each run's file links by record id, found once per run (a
    run has a row per protocol)."""
    paired = (row.get('compare') or {}).get('paired') or {}
    diffs = dict(zip(paired.get('seeds') or [], paired.get('diffs') or []))
    seeds = []
    for run in sorted(row.get('runs') or [], key=lambda r: r['seed']):
        value = run['value']
        if run['id'] not in links:
            links[run['id']] = run_links(run, record_dirs, folder)
        seeds.append(dict(seed=run['seed'], value=_number(value),
                          na='' if _number(value) is not None else str(value or 'not recorded'),
                          diff=diffs.get(run['seed']), status=run['status'],
                          time_s_per_epoch=run['time_s_per_epoch'],
                          peak_memory_gb=run['peak_memory_gb'], commit=run['commit'] or '',
                          dirty=run['dirty'], versions=run['versions'], links=links[run['id']]))
    metric, higher = main_metric(row['protocol'])
    return dict(section=section_title(*(row[k] for k in SECTION)), metric=metric, higher=higher,
                digits=int(METRIC_FORMATS.get(metric, '.2f')[1:-1]), seeds=seeds,
                overrides=row['overrides'],
                left_out=(row.get('compare') or {}).get('left_out') or [])


def _section(group: List[Row]) -> Optional[Dict[str, Any]]:
    """One section's aggregates across tasks and its performance profile (None without a
    method compared over tasks)."""
    min_seeds = section_min_seeds(group)
    by_method = section_tasks(group)
    lines = method_lines(by_method, min_seeds)
    if not lines:
        return None
    taus, shares = profiles(by_method, PROFILE_POINTS, min_seeds)
    profile = [dict(method=method_label(method), share=[round(float(v), 4) for v in share],
                    band=[[round(float(v), 4) for v in b] for b in band] if band is not None
                    else None) for method, share, band in shares]
    pair = lambda ci: [float(ci[0]), float(ci[1])] if ci is not None else None  # noqa: E731
    return dict(min_seeds=min_seeds, taus=[round(float(t), 4) for t in taus], profile=profile,
                lines=[dict(method=method_label(line['method']),
                            baseline=method_label(line['baseline']),
                            tasks=[task_label(t) for t in line['tasks']], seeds=line['seeds'],
                            iqm=line['iqm'], iqm_ci=pair(line['iqm_ci']), mean=line['mean'],
                            mean_ci=pair(line['mean_ci']), improve=line['improve'],
                            improve_ci=pair(line['improve_ci'])) for line in lines])


def _tradeoff(rows: List[Row], board: Dict[str, Any]) -> Dict[str, Any]:
    """Accuracy (top-1) against total training FLOPs of this suite's trained rows, by task
    (protocol and evaluation data): per config and variant a line through its rows ordered by
    FLOPs, each point at equal epochs (`board['equal_epochs']`), at equal compute (its records
    are the board's) or both; rows whose records hold no count are named in ``not_counted``."""
    budget_ids = {run['id'] for row in board['rows'] for run in row.get('runs') or [] if run['id']}
    ours = [r for r in rows if r['source'] == SUITE and r['method'] != RANDOM_INIT
            and main_metric(r['protocol'])[0] == 'top1'
            and (r['metrics'].get('top1') or {}).get('mean') is not None]
    shared = common_overrides(ours)
    tasks: Dict[str, Dict[tuple, Dict[str, Any]]] = {}
    not_counted = []
    for row in ours:
        ids = {run['id'] for run in row.get('runs') or [] if run['id']}
        regimes = [name for name, held in (('equal epochs', row['pretrain_epochs'] in
                                            board['equal_epochs']),
                                           ('equal compute', bool(ids) and ids <= budget_ids))
                   if held]
        if not ids or not regimes:
            continue
        own = {k: v for k, v in regime_free(row['overrides']).items() if shared.get(k) != v}
        label = row_label(row['method']) + (
            f" [{', '.join(override_text(k, v) for k, v in own.items())}]" if own else '')
        task = (f"{PROTOCOLS.get(row['protocol'], row['protocol'])} on {row['eval_data']}"
                + (f" ({row['protocol_settings']})" if row['protocol_settings'] else ''))
        if row.get('train_flops') is None:
            not_counted.append(f"{label} at {row['pretrain_epochs']} epochs, {task}")
            continue
        line = tasks.setdefault(task, {}).setdefault(
            (row['method'], row['config'], json.dumps(regime_free(row['overrides']),
                                                      sort_keys=True, default=str)),
            dict(label=label, points=[]))
        line['points'].append(dict(flops=float(row['train_flops']),
                                   top1=float(row['metrics']['top1']['mean']),
                                   epochs=row['pretrain_epochs'], regime=' and '.join(regimes),
                                   seeds=len(row['seeds']), compute=compute_text(row)))
    for lines in tasks.values():
        for line in lines.values():
            line['points'].sort(key=lambda p: p['flops'])
    return dict(tasks={task: list(lines.values()) for task, lines in tasks.items()},
                not_counted=not_counted)


def equal_compute_data(rows: List[Row], columns: List[str],
                       board: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The explorer's section at equal training compute from the suite's board (None without
    one): its intro and verdict sentences, the board's rows as CSV lines in `columns` (with
    their digits and training compute) and the trade-off of accuracy against training FLOPs
    (`_tradeoff`)."""
    if not board:
        return None
    flat = list(csv.DictReader(io.StringIO(render_csv(board['rows']))))
    out_rows = [dict(csv=[line.get(c, '') for c in columns], compute=compute_text(row),
                     digits=int(METRIC_FORMATS.get(main_metric(row['protocol'])[0],
                                                   '.2f')[1:-1]))
                for row, line in zip(board['rows'], flat)]
    return dict(intro=board['intro'], verdicts=list(board['verdicts']), rows=out_rows,
                budget=flop_text(board['flops']), budget_flops=float(board['flops']),
                equal_epochs=list(board['equal_epochs']), **_tradeoff(rows, board))


def explorer_data(rows: List[Row], csv_text: str, record_dirs: Sequence[str], folder: Path,
                  title: str, generated: str,
                  equal_compute: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """What the page embeds: its title, when it was generated, the CSV's columns, each row's
    CSV line (`csv_text`: the rows' ``leaderboard.csv``) with its detail, each section's
    aggregates and, for a suite with a budget (`equal_compute`: its board), the section at
    equal training compute (`equal_compute_data`; None without one)."""
    reader = csv.DictReader(io.StringIO(csv_text))
    flat = list(reader)
    out_sections = {}
    for (backbone, epochs, data), group in sections(rows).items():
        section = _section(group)
        if section:
            out_sections[section_title(backbone, epochs, data)] = section
    columns = reader.fieldnames or []
    out_rows, shared, links = [], {}, {}
    for row, line in zip(rows, flat):
        detail = _detail(row, record_dirs, folder, links)
        for seed in detail['seeds']:  # the same few package versions, said once
            text = json.dumps(seed['versions'], sort_keys=True)
            seed['versions'] = shared.setdefault(text, len(shared))
        out_rows.append(dict(csv=[line[c] for c in columns], **detail))
    return dict(title=title, generated=generated, columns=columns, rows=out_rows,
                shared=[json.loads(text) for text in shared], sections=out_sections,
                equal_compute=equal_compute_data(rows, columns, equal_compute))


def render_explorer(rows: List[Row], csv_text: str, folder: Path, record_dirs: Sequence[str],
                    title: str, generated: str,
                    equal_compute: Optional[Dict[str, Any]] = None) -> Path:
    """Write ``index.html`` into `folder` (`csv_text`: the rows' CSV; the rows' records are
    read from `record_dirs`, for the links; `equal_compute`: a suite's board at its budget) and
    return its path."""
    data = explorer_data(rows, csv_text, record_dirs, folder, title, generated, equal_compute)
    payload = json.dumps(data, ensure_ascii=False, separators=(',', ':'), allow_nan=False)
    payload = payload.replace('</', '<\\/')  # never ends the script element early
    frame = (ASSETS / 'explorer.html').read_text(encoding='utf-8')
    page = (frame.replace('/*STYLE*/', (ASSETS / 'explorer.css').read_text(encoding='utf-8'))
            .replace('/*SCRIPT*/', (ASSETS / 'explorer.js').read_text(encoding='utf-8'))
            .replace('{{TITLE}}', _escape(title)).replace('/*DATA*/', payload))
    path = folder / EXPLORER
    atomic_write_text(str(path), page)
    return path


def _escape(text: str) -> str:
    return html.escape(text, quote=False)
