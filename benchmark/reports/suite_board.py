"""A suite's leaderboard page, its summary block and its monitor curves (pure rendering; the
suite runner does the I/O).

The tables are the leaderboard's (``benchmark.reports.tables``): one row per configuration, mean
± std over seeds with n and the exact interval (or the seeds' range under the minimum), the paired comparison with the baseline and the
paper's number where it has the row. Here: only the paper's rows that sit beside one of ours, a
header naming the suite, the generated verdicts, a table of its runs, the monitor curves (mean
and spread over seeds), and `summary_markdown`: the compact block (main metric, comparison,
verdicts, interval plot, hardware) that ``tools/run_suite.py --publish`` puts into a page.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from benchmark.names import METRIC_FORMATS, PROTOCOL_ORDER, PROTOCOLS, protocol_family
from benchmark.reports.aggregate_board import across_sections, aggregate_lines
from benchmark.reports.comparisons import SUITE, main_metric
from benchmark.reports.compute import host_text
from benchmark.reports.figures import figure_lines
from benchmark.reports.leaderboard import KEY, Row, section_title
from benchmark.reports.tables import (AGGREGATE_POINTER, LEGEND_TITLE, delta_cell,
                                      improvement_cell, interval_cell, legend_lines,
                                      render_markdown, sections, test_cell, verdict_cell)

SUITE_SUMMARY = 'summary.md'
SUMMARY_LEGEND = (
    "Intervals: exact sign-flip intervals over seeds (the seeds' range under min_seeds); Δ: "
    'seed by seed, its interval at the level Holm judged it within its family. Test: exact '
    'sign-flip, Holm within the family. P(better): share of seeds won, Clopper-Pearson. '
    'The full leaderboard\'s legend says more.')
# The protocols of the accuracy tables (the verdicts a suite's page lists), in table order.
CLASSIFICATION_PROTOCOLS = tuple(p for p in PROTOCOL_ORDER
                                 if protocol_family(p) == 'classification')
MONITOR_KEYS = {'knn_monitor/top1': 'kNN monitor top-1 (%)',
                'online_linear/top1': 'online linear probe top-1 (%)'}
Series = Dict[str, Dict[int, float]]  # monitor key -> {epoch: value}


def paper_beside_ours(rows: List[Row]) -> List[Row]:
    """Our rows, and the paper's rows of a group (backbone, epochs, data, protocol, method)
    where we have one too."""
    ours = {tuple(r[k] for k in KEY) for r in rows if r['source'] == SUITE}
    return [r for r in rows if r['source'] == SUITE or tuple(r[k] for k in KEY) in ours]


def monitor_series(work_dir: str, keys: Iterable[str] = tuple(MONITOR_KEYS)) -> Series:
    """{key: {epoch: value}} from every ``*/vis_data/scalars.json`` of a work dir, oldest file
    first, so a resumed run's curve holds the epochs before and after its restart."""
    series: Series = {key: {} for key in keys}
    files = sorted(Path(work_dir).glob('*/vis_data/scalars.json'),
                   key=lambda p: (p.stat().st_mtime, str(p)))
    for path in files:
        for line in path.read_text(encoding='utf-8').splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a killed run
            for key in series:
                if isinstance(row, dict) and key in row and 'step' in row:
                    series[key][int(row['step'])] = float(row[key])
    return {key: points for key, points in series.items() if points}


def mean_and_spread(curves: Sequence[Dict[int, float]]) -> List[Tuple[int, float, float, int]]:
    """(epoch, mean, sample std (0 for one run), n) at every epoch some curve has."""
    epochs = sorted({e for curve in curves for e in curve})
    out = []
    for epoch in epochs:
        values = [curve[epoch] for curve in curves if epoch in curve]
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        out.append((epoch, statistics.fmean(values), spread, len(values)))
    return out


def plot_monitor_curves(groups: Dict[str, List[Series]], path: str) -> bool:
    """One panel per monitor key: per label the mean over its runs (seeds) and a ±1 std band.

    Args:
        groups: Row label -> the monitor series of each of its runs.
        path: The PNG to write.

    Returns:
        False (and nothing written) when no run logged a monitor value.
    """
    keys = [k for k in MONITOR_KEYS if any(k in s for runs in groups.values() for s in runs)]
    if not keys:
        return False
    from matplotlib.figure import Figure  # a bare Figure: Agg, no pyplot global state

    fig = Figure(figsize=(6.5 * len(keys), 4.5), layout='constrained')
    for ax, key in zip(fig.subplots(1, len(keys), squeeze=False)[0], keys):
        for label, runs in groups.items():
            points = mean_and_spread([s[key] for s in runs if key in s])
            if not points:
                continue
            epochs, means, spreads, counts = zip(*points)
            line, = ax.plot(epochs, means, marker='o', markersize=3,
                            label=f'{label} (n={max(counts)})')
            ax.fill_between(epochs, [m - s for m, s in zip(means, spreads)],
                            [m + s for m, s in zip(means, spreads)], color=line.get_color(),
                            alpha=0.2, linewidth=0)
        ax.set(xlabel='epoch', ylabel=MONITOR_KEYS[key], title=f'{MONITOR_KEYS[key]}: mean ± std')
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    return True


def _cell(text: object) -> str:
    return str(text).replace('|', '\\|')


def suite_markdown(suite: Dict[str, object], rows: List[Row], runs: List[Dict[str, str]],
                   generated: str, runs_glob: str, curves: str = '',
                   figures: Optional[Dict[str, str]] = None, verdicts: Sequence[str] = ()) -> str:
    """The suite's page: what it runs, the leaderboard tables, its runs and the curves.

    Args:
        suite: name, file, seeds, procs, cfg_options, evaluations (printable values).
        rows: Leaderboard rows (``build_rows``), suite variants included.
        runs: One dict per run: run, variant, seed, state, log.
        generated: Date and time of generation.
        runs_glob: Where the records were read from.
        curves: File name of the monitor curves beside the page ('' for none; the
            `figures.NotDrawn` note where they could not be drawn).
        figures: {section title: file name} of the interval plots beside the page.
        verdicts: What the statistics support (`verdicts.verdicts`).
    """
    head = [f"# Suite {suite['name']}", '',
            f"Suite file `{suite['file']}`; seeds {suite['seeds']}; {suite['procs']} process(es) "
            f"per run; overrides for every run: {suite['cfg_options'] or 'none'}; "
            f"evaluations: {suite['evaluations']}. Rows of a variant carry its overrides in "
            'brackets; variants are never averaged with the default. Rows with status failed, '
            'queued or missing are runs or evaluations without a record yet.', '']
    across = across_sections(rows)
    tables = render_markdown(rows, generated, runs_glob, tool='tools/run_suite.py',
                             figures=figures, verdicts=verdicts, across=across, legend=False)
    lines = head + [tables.replace('\n## ', '\n### ').replace('\n### Accuracy', '\n#### Accuracy')
                    .replace('\n### Cluster', '\n#### Cluster'), '## Runs', '',
                    '| run | variant | seed | this time | log |', '|---|---|---|---|---|']
    lines += [f"| {_cell(r['run'])} | {_cell(r['variant'])} | {r['seed']} | {_cell(r['state'])} "
              f"| {_cell(r.get('log') or '')} |" for r in runs]
    if curves:
        lines += ['', '## Monitor curves', '',
                  'kNN monitor and online linear probe (val split) over pretraining epochs: mean '
                  'over seeds, band = ±1 sample std.', ''] + figure_lines(
                      {'curves': curves}, 'curves', 'monitor curves')
    lines += ['', f'## {LEGEND_TITLE}', ''] + legend_lines(rows, bool(across))
    return '\n'.join(lines) + '\n'


def hardware(records: Iterable[Dict[str, Any]]) -> str:
    """Where the records' runs were evaluated: 'cpu (Intel Xeon, 2 cores)' and the like ('1 of 2
    cores' for a run given a share of the machine), one entry per distinct host description,
    from the records' ``host`` fields."""
    seen: Dict[str, int] = {}
    for record in records:
        text = host_text(record.get('host') or {})
        seen[text] = seen.get(text, 0) + 1
    return '; '.join(f'{text}: {n} record(s)' for text, n in seen.items()) or 'no records'


def _mean_cell(row: Row) -> str:
    metric = main_metric(row['protocol'])[0]
    stat = row['metrics'].get(metric) or {}
    if stat.get('text') is not None:
        return f"{stat['text']} (paper)"
    if not stat.get('n'):
        return 'NA'
    interval = interval_cell(row, metric)
    return (f"{stat['mean']:{METRIC_FORMATS[metric]}}{' ' + interval if interval else ''} "
            f"(n={stat['n']})")


def summary_markdown(suite: Dict[str, object], rows: List[Row], verdicts: Sequence[str],
                     figures: Dict[str, str], generated: str, where: str) -> str:
    """The compact block of a suite's results: per section, the main metric of every
    classification row of ours with its interval and comparison, the interval plot and the
    verdicts; the hardware and the command named. Figures are linked by file name (the
    publisher rewrites the links)."""
    lines = [f"_Generated by `tools/run_suite.py {suite['file']}` on {generated}, from the "
             f'records of {where}; regenerated with the tables, never typed._', '']
    settings: Dict[str, List[str]] = {}  # protocol label -> its settings as run, in order
    aggregated = False
    for (backbone, epochs, data), group in sections(rows).items():
        title = section_title(backbone, epochs, data)
        mine = [r for r in group if r['source'] == SUITE
                and protocol_family(r['protocol']) == 'classification']
        if not mine:
            continue
        lines += [f'**{title}** (top-1 %, mean and interval over seeds; Δ paired over seeds):',
                  '', '| eval data | protocol | method | top-1 | Δ vs baseline, interval | '
                  'sign-flip test | verdict (family, size) | P(better) |',
                  '|---|---|---|---|---|---|---|---|']
        for row in mine:
            ran = settings.setdefault(PROTOCOLS.get(row['protocol'], row['protocol']), [])
            if row.get('protocol_settings') and row['protocol_settings'] not in ran:
                ran.append(row['protocol_settings'])
            cells = [row['eval_data'], PROTOCOLS.get(row['protocol'], row['protocol']),
                     row['label'] + ('' if row['status'] == 'ok' else f" ({row['status']})"),
                     _mean_cell(row), delta_cell(row['compare']), test_cell(row['compare']),
                     verdict_cell(row['compare']), improvement_cell(row['compare'])]
            lines.append('| ' + ' | '.join(str(c).replace('|', '\\|') for c in cells) + ' |')
        lines.append('')
        plot = figure_lines(figures, title, f'intervals: {title}')
        lines += plot + [''] if plot else []
        across = aggregate_lines(group)
        aggregated = aggregated or bool(across)
        lines += across
        for kind in ('profile', 'ranks'):
            plot = figure_lines(figures, f'{title} · {kind}', f'{kind}: {title}')
            lines += plot + [''] if plot else []
    if verdicts:
        lines += ['What the statistics support:', ''] + [f'- {v}' for v in verdicts] + ['']
    ran = '; '.join(f"{name}: {' | '.join(texts)}" for name, texts in settings.items() if texts)
    if ran:
        lines += [f'Protocols as run (part of each row\'s identity): {ran}.', '']
    lines.append(SUMMARY_LEGEND + (f' {AGGREGATE_POINTER}' if aggregated else ''))
    return '\n'.join(lines) + '\n'
