"""Interval plots of leaderboard rows: per protocol, each row's mean with its interval and each
paired Δ with its interval against the baseline (a bare matplotlib Figure, no pyplot).

One figure per section (backbone, epochs, pretraining data); one line of panels per protocol
and evaluation data: on the left the rows' means (dots; bars = the exact sign-flip interval over
seeds; grey bars = the seeds' range, for rows under the suite's minimum of seeds; the paper's
numbers as open diamonds), on the right the paired Δ to the baseline (bars = its interval at the
level its family judged it; grey = the range of the per-seed differences where there is no such
interval; a dashed line at 0). A row with one seed has a dot and no bar.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence

from benchmark.names import PROTOCOLS
from benchmark.reports.comparisons import SUITE, main_metric
from benchmark.reports.figures import draw
from benchmark.reports.leaderboard import GROUP, section_title
from benchmark.reports.stats import MIN_SEEDS

Row = Dict[str, Any]


def panels_of(rows: Sequence[Row]) -> List[tuple]:
    """The (evaluation data, protocol) pairs where a row of ours has a mean, in table order."""
    found = {(r['eval_data'], r['protocol']) for r in rows if r['source'] == SUITE
             and (r['metrics'].get(main_metric(r['protocol'])[0]) or {}).get('mean') is not None}
    order = {(r['eval_data'], r['protocol']): i for i, r in enumerate(rows)}
    return sorted(found, key=lambda pair: order[pair])


def bar_extent(centre: float, interval: Sequence[float]) -> List[List[float]]:
    """matplotlib's ``xerr`` of a bar from `centre` to the ends of `interval`; an end a float
    round-off on the wrong side of the centre is drawn at the centre (matplotlib refuses a
    negative extent)."""
    return [[max(0.0, centre - interval[0])], [max(0.0, interval[1] - centre)]]


def _label(row: Row) -> str:
    return row['label'] if row['status'] == 'ok' else f"{row['label']} ({row['status']})"


def plot_intervals(rows: Sequence[Row], path: str, title: str = '') -> bool:
    """Write the interval plot of `rows` (one section) to `path`; False (nothing written) if no
    row of ours has a mean, or none has an interval or a paired comparison (single runs). The
    paper's rows show in the panels of ours."""
    pairs = panels_of(rows)
    spread = any(r['source'] == SUITE and ((r['metrics'].get(main_metric(r['protocol'])[0]) or {})
                                           .get('ci') or (r.get('compare') or {}).get('paired'))
                 for r in rows)
    if not pairs or not spread:  # single runs only: there is no interval to show
        return False
    from matplotlib.figure import Figure

    panels = []
    for data, protocol in pairs:
        metric, higher = main_metric(protocol)
        mine = [r for r in rows if r['protocol'] == protocol and r['eval_data'] == data
                and (r['metrics'].get(metric) or {}).get('mean') is not None]
        name = PROTOCOLS.get(protocol, protocol)
        panels.append((f'{name} on {data}', metric, higher, mine))
    per_row = 0.32 if max(len(m) for *_, m in panels) <= 30 else 0.2  # many rows: denser
    height = sum(max(1.6, per_row * len(m) + 0.9) for *_, m in panels)
    fig = Figure(figsize=(12, height), layout='constrained')
    axes = fig.subplots(len(panels), 2, squeeze=False,
                        height_ratios=[max(1.0, len(m)) for *_, m in panels])
    for (name, metric, higher, mine), (left, right) in zip(panels, axes):
        ys = list(range(len(mine)))[::-1]
        marks: Dict[tuple, List[tuple]] = {}  # (axis, style): one call per style, not per row
        for y, row in zip(ys, mine):
            stat = row['metrics'][metric]
            ours = row['source'] == SUITE
            enough = ours and stat.get('n', 0) >= row.get('min_seeds', MIN_SEEDS)
            bar = stat.get('ci') if enough else stat.get('range') if ours else None
            if bar and stat.get('n', 0) > 1:
                marks.setdefault((0, 'o', 'C0' if enough else 'grey', 'full'), []).append(
                    (stat['mean'], y, bar_extent(stat['mean'], bar)))
            else:
                marks.setdefault((0, 'o' if ours else 'D', 'C0' if ours else 'C3',
                                  'full' if ours else 'none'), []).append((stat['mean'], y, None))
            paired = (row.get('compare') or {}).get('paired')
            if paired:
                ci = paired.get('ci') or (paired['range'] if paired['n'] > 1 else None)
                marks.setdefault((1, 's', 'C2' if paired.get('ci') else 'grey', 'full'), []).append(
                    (paired['delta'], y, bar_extent(paired['delta'], ci) if ci else [[0.0], [0.0]]))
        for (side, marker, colour, fill), points in marks.items():
            xs, at, extents = zip(*points)
            bars = None if extents[0] is None else [[e[0][0] for e in extents],
                                                     [e[1][0] for e in extents]]
            (left, right)[side].errorbar(xs, at, xerr=bars, fmt=marker, color=colour,
                                         fillstyle=fill, capsize=3 if bars else 0)
        labels = [_label(r) for r in mine]
        for ax in (left, right):
            ax.set_yticks(ys, labels if ax is left else [''] * len(ys), fontsize=8)
            ax.set_ylim(-0.7, len(mine) - 0.3)
            ax.grid(axis='x', alpha=0.3)
        better = 'higher' if higher else 'lower'
        left.set_title(f'{name}: {metric} ({better} is better)', fontsize=9)
        right.axvline(0.0, color='grey', linestyle='--', linewidth=1)
        right.set_title(f'paired Δ {metric} vs baseline', fontsize=9)
        if not any((r.get('compare') or {}).get('paired') for r in mine):
            right.text(0.5, 0.5, 'no paired comparison', ha='center', va='center',
                       transform=right.transAxes, fontsize=8, color='grey')
    fig.suptitle((f'{title}\n' if title else '') + 'bars: exact sign-flip intervals (Δ: at the '
                 'level its family judged it); grey: the range of the seeds, under min_seeds',
                 fontsize=9)
    fig.savefig(path, dpi=100)
    return True


def section_figures(rows: Sequence[Row], folder: str, stem: str = 'intervals') -> Dict[str, str]:
    """One interval plot per section of `rows` in `folder`: {section title: file name, or the
    `figures.NotDrawn` note of a plot that could not be drawn}.

    The file is ``<stem>.png`` for a single section, else ``<stem>_<backbone>_<epochs>e_<data>.png``.
    """
    groups: Dict[tuple, List[Row]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in GROUP), []).append(row)
    out = {}
    Path(folder).mkdir(parents=True, exist_ok=True)
    for (backbone, epochs, data), members in groups.items():
        title = section_title(backbone, epochs, data)
        name = (f'{stem}.png' if len(groups) == 1
                else f'{stem}_{backbone}_{epochs}e_{data}.png')
        path = Path(folder) / name
        result = draw(f'the interval plot of {title}', path,
                      lambda: plot_intervals(members, str(path), title))
        if result:
            out[title] = name if result is True else result
    return out
