"""Aggregates across tasks on the leaderboard: per section, a line per method against its
baseline over every task (evaluation data x protocol and its settings), the Friedman test with
its critical difference over seeds, the performance profile and the rank figure.

Tasks are the classification rows of ours run as the suite runs them (no variant, no override
of their own, not legacy, status ok); their metric is top-1 accuracy in % everywhere, one
scale, so values are aggregated as they are (no normalisation). Cluster indices (Davies-Bouldin,
unbounded and lower-better) are not aggregated. The statistics are `benchmark.reports.aggregate`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from benchmark.names import BASELINES, PROTOCOLS, method_label, protocol_family
from benchmark.reports import aggregate
from benchmark.reports.comparisons import SECTION, SUITE
from benchmark.reports.figures import draw
from benchmark.reports.leaderboard import common_overrides, section_title
from benchmark.reports.stats import ALPHA, MIN_SEEDS
from benchmark.reports.tables import format_p, signed

Row = Dict[str, Any]
Task = Tuple[str, str, str]  # evaluation data, protocol, protocol settings
COMPARED = frozenset(BASELINES) | frozenset(BASELINES.values())

def _own_overrides(row: Row, common: Dict[str, Any]) -> bool:
    return any(common.get(k, object()) != v for k, v in row['overrides'].items())


def section_tasks(group: Sequence[Row]) -> Dict[str, Dict[Task, Dict[int, float]]]:
    """{method: {task: {seed: top-1}}} of one section's rows run as the suite runs them."""
    ours = [r for r in group if r['source'] == SUITE]
    common = common_overrides(ours)
    out: Dict[str, Dict[Task, Dict[int, float]]] = {}
    for row in ours:
        if (row['status'] != 'ok' or row.get('variant') or row['legacy'] or not row['by_seed']
                or protocol_family(row['protocol']) != 'classification'
                or row['method'] not in COMPARED or _own_overrides(row, common)):
            continue
        task = (row['eval_data'], row['protocol'], row.get('protocol_settings', ''))
        out.setdefault(row['method'], {})[task] = dict(row['by_seed'])
    return out


def section_min_seeds(group: Sequence[Row], given: Optional[int] = None) -> int:
    """The seeds an interval needs in a section: `given`, else its rows' own (a suite's
    min_seeds), else `MIN_SEEDS`."""
    return given or next((r.get('min_seeds') for r in group if r.get('min_seeds')), MIN_SEEDS)


def profiles(by_method: Dict[str, Dict[Task, Dict[int, float]]], points: int, min_seeds: int
             ) -> Tuple[np.ndarray, List[Tuple[str, np.ndarray, Optional[np.ndarray]]]]:
    """The performance profile of each method on `points` thresholds τ spanning the section's
    values: (τ, [(method, its profile, its band from min_seeds seeds, else None)])."""
    values = [v for tasks in by_method.values() for t in tasks.values() for v in t.values()]
    low, high = min(values), max(values)
    pad = max(0.5, 0.05 * (high - low))
    taus = np.linspace(low - pad, high + pad, points)
    out = []
    for method, tasks in sorted(by_method.items()):
        series = list(tasks.values())
        band = (aggregate.profile_band(series, taus)
                if min(len(s) for s in series) >= min_seeds else None)
        out.append((method, aggregate.profile(series, taus), band))
    return taus, out


def task_label(task: Task) -> str:
    return f'{PROTOCOLS.get(task[1], task[1])} on {task[0]}'


def method_lines(by_method: Dict[str, Dict[Task, Dict[int, float]]], min_seeds: int,
                 alpha: float = ALPHA) -> List[Dict[str, Any]]:
    """Per method with a baseline in the section: its aggregates over the tasks both have."""
    out = []
    for method, tasks in sorted(by_method.items()):
        base = by_method.get(BASELINES.get(method, ''))
        shared = [t for t in sorted(set(tasks) & set(base or {}))
                  if set(tasks[t]) & set(base[t])]  # tasks with a paired seed
        if not shared:
            continue
        mine, theirs = [tasks[t] for t in shared], [base[t] for t in shared]
        diffs = aggregate.paired_diffs(mine, theirs)
        pooled = [d for task in diffs for d in task.values()]
        paired_n = min(len(d) for d in diffs)
        own_n = min(len(x) for x in mine + theirs)
        line = dict(method=method, baseline=BASELINES[method], tasks=shared, seeds=paired_n,
                    iqm=aggregate.iqm(pooled), mean=float(np.mean(pooled)),
                    improve=aggregate.improvement(mine, theirs),
                    iqm_ci=None, mean_ci=None, improve_ci=None)
        if paired_n >= min_seeds:
            line.update(iqm_ci=aggregate.interval(diffs, aggregate.iqm_draws, alpha),
                        mean_ci=aggregate.interval(diffs, aggregate.mean_draws, alpha))
        if own_n >= min_seeds:
            line['improve_ci'] = aggregate.improvement_interval(mine, theirs, alpha)
        out.append(line)
    return out


def rank_test(by_method: Dict[str, Dict[Task, Dict[int, float]]], min_seeds: int,
              alpha: float = ALPHA) -> Optional[Dict[str, Any]]:
    """The Friedman test over the seeds every method has on every shared task (None under 3
    methods); 'why' says why it was not run."""
    methods = sorted(by_method)
    if len(methods) < 3:
        return None
    tasks = sorted(set.intersection(*(set(t) for t in by_method.values())))
    seeds = sorted(set.intersection(*(set(by_method[m][t]) for m in methods for t in tasks))
                   ) if tasks else []
    out: Dict[str, Any] = dict(methods=methods, tasks=tasks, seeds=seeds)
    if not tasks:
        return dict(out, why='no task that every method has')
    if len(seeds) < max(min_seeds, 2):
        return dict(out, why=f'{len(seeds)} seed(s) shared by every method, under '
                             f'min_seeds {min_seeds}')
    values = [[float(np.mean([by_method[m][t][s] for t in tasks])) for m in methods]
              for s in seeds]
    return dict(out, **aggregate.friedman(values, True, alpha), why=None)


def _ci(ci: Optional[Tuple[float, float]], fmt: str, sign: str) -> str:
    """' [low, high]'; '' without one; a bootstrap that gave one value is no interval."""
    if ci is None:
        return ''
    if signed(ci[0], fmt, sign) == signed(ci[1], fmt, sign):
        return ' (every resample alike: no interval)'
    return f' [{signed(ci[0], fmt, sign)}, {signed(ci[1], fmt, sign)}]'


def aggregate_lines(group: Sequence[Row], min_seeds: Optional[int] = None) -> List[str]:
    """Markdown of one section's aggregates ([] where no method has a baseline's tasks); the
    page's legend says how they are made (`tables.AGGREGATE_LEGEND`)."""
    min_seeds = section_min_seeds(group, min_seeds)
    by_method = section_tasks(group)
    lines = method_lines(by_method, min_seeds)
    if not lines:
        return []
    tasks = sorted({t for line in lines for t in line['tasks']})
    out = [f"Across tasks ({len(tasks)}: {', '.join(task_label(t) for t in tasks)}); Δ in "
           f'top-1 points, seed by seed against the baseline; intervals from {min_seeds} seeds:',
           '', '| method | vs | tasks | paired seeds | IQM Δ, 95% interval | mean Δ, 95% interval '
           '| P(improve), 95% interval |', '|---|---|---|---|---|---|---|']
    for line in lines:
        out.append(
            f"| {method_label(line['method'])} | {method_label(line['baseline'])} | "
            f"{len(line['tasks'])} | {line['seeds']} | "
            f"{signed(line['iqm'], '.2f')}{_ci(line['iqm_ci'], '.2f', '+')} | "
            f"{signed(line['mean'], '.2f')}{_ci(line['mean_ci'], '.2f', '+')} | "
            f"{line['improve']:.2f}{_ci(line['improve_ci'], '.2f', '')} |")
    test = rank_test(by_method, min_seeds)
    if test is not None:
        out += ['', rank_sentence(test)]
    return out + ['']


def _sections(rows: Sequence[Row]) -> Dict[str, List[Row]]:
    """{section title: its rows}, titled as the tables title them."""
    out: Dict[str, List[Row]] = {}
    for row in rows:
        backbone, epochs, data = (row[k] for k in SECTION)
        out.setdefault(section_title(backbone, epochs, data), []).append(row)
    return out


def across_sections(rows: Sequence[Row]) -> Dict[str, List[str]]:
    """{section title: the Markdown lines of its aggregates} for the sections that have any."""
    out = {}
    for title, members in _sections(rows).items():
        lines = aggregate_lines(members)
        if lines:
            out[title] = lines
    return out


def rank_sentence(test: Dict[str, Any]) -> str:
    names = [method_label(m) for m in test['methods']]
    if test['why']:
        return f"Friedman test over seeds ({', '.join(names)}): not run, {test['why']}."
    order = sorted(zip(test['average_ranks'], names))
    kind = 'exact' if test['exact'] else 'Monte Carlo'
    chi2 = test['statistic']
    return (f"Friedman test over {test['blocks']} seeds ({test['k']} methods, "
            f"each one's mean over {len(test['tasks'])} task(s) per seed): chi-square "
            f"{'— (every seed ties every method)' if chi2 is None else format(chi2, '.2f')}, {kind} permutation p = {format_p(test['p'])} (smallest "
            f"possible {format_p(test['smallest_p'])}); average ranks (1 = best) "
            + ', '.join(f'{n} {r:.2f}' for r, n in order)
            + f"; critical difference {test['cd']:.2f}.")


# -- figures -------------------------------------------------------------------------------------

def plot_profile(by_method: Dict[str, Dict[Task, Dict[int, float]]], path: str, title: str,
                 min_seeds: int) -> bool:
    """The performance profile of every method of a section (bands from min_seeds seeds)."""
    if not by_method:
        return False
    from matplotlib.figure import Figure  # a bare Figure: Agg, no pyplot global state
    taus, lines = profiles(by_method, 241, min_seeds)
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    for method, share, band in lines:
        line, = ax.plot(taus, share, label=method_label(method))
        if band is not None:
            ax.fill_between(taus, band[0], band[1], color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xlabel('top-1 % (τ)')
    ax.set_ylabel('fraction of seeds with top-1 > τ\n(averaged over tasks)')
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f'Performance profile · {title}', fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def plot_ranks(test: Dict[str, Any], path: str, title: str) -> bool:
    """The critical-difference diagram: average ranks on a line, the CD as a bar, and a thick
    line joining each maximal run of methods whose ranks are within the CD of each other."""
    if not test or test.get('why'):
        return False
    from matplotlib.figure import Figure
    names = [method_label(m) for m in test['methods']]
    order = sorted(zip(test['average_ranks'], names))
    k = len(order)
    fig = Figure(figsize=(6.4, 1.2 + 0.3 * k))
    ax = fig.add_subplot()
    ax.set_xlim(0.5, k + 0.5)
    ax.set_ylim(-0.4 * k - 1.0, 1.4)
    ax.axhline(0, color='black', lw=1)
    for r in range(1, k + 1):
        ax.plot([r, r], [0, 0.12], color='black', lw=1)
        ax.text(r, 0.22, str(r), ha='center', fontsize=8)
    for i, (rank, name) in enumerate(order):
        y = -0.7 - 0.4 * i
        ax.plot([rank, rank], [0, y], color='grey', lw=0.8)
        ax.text(rank + 0.05, y, f'{name} ({rank:.2f})', va='center', fontsize=8)
    cd = test['cd']
    ax.plot([1, 1 + cd], [1.0, 1.0], color='black', lw=2)
    ax.text(1 + cd / 2, 1.1, f'CD {cd:.2f}', ha='center', fontsize=8)
    runs = [(i, j) for i in range(k) for j in range(i + 1, k)
            if order[j][0] - order[i][0] <= cd + 1e-12]
    maximal = [(i, j) for i, j in runs if not any(a <= i and j <= b and (a, b) != (i, j)
                                                   for a, b in runs)]
    for depth, (i, j) in enumerate(maximal):
        y = -0.2 - 0.12 * depth
        ax.plot([order[i][0] - 0.03, order[j][0] + 0.03], [y, y], color='black', lw=3)
    ax.axis('off')
    ax.set_title(f'Average ranks over seeds · {title}', fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def aggregate_figures(rows: Sequence[Row], folder: str,
                      min_seeds: Optional[int] = None) -> Dict[str, str]:
    """The profile and rank figures of each section: {'<title> · profile' / '<title> · ranks':
    file name, or the `figures.NotDrawn` note of one that could not be drawn} in `folder` (``profile.png`` and ``ranks.png`` for a single section, else named
    after the section)."""
    groups = _sections(rows)
    out: Dict[str, str] = {}
    for title, members in groups.items():
        seeds = section_min_seeds(members, min_seeds)
        by_method = section_tasks(members)
        if not method_lines(by_method, seeds):
            continue
        backbone, epochs, data = (members[0][k] for k in SECTION)
        stem = '' if len(groups) == 1 else f'_{backbone}_{epochs}e_{data}'
        Path(folder).mkdir(parents=True, exist_ok=True)
        test = rank_test(by_method, seeds) or {}
        for kind, what, plot in (
                ('profile', 'the performance profile',
                 lambda path: plot_profile(by_method, path, title, seeds)),
                ('ranks', 'the rank diagram', lambda path: plot_ranks(test, path, title))):
            path = str(Path(folder) / f'{kind}{stem}.png')
            result = draw(f'{what} of {title}', path, lambda: plot(path))
            if result:
                out[f'{title} · {kind}'] = f'{kind}{stem}.png' if result is True else result
    return out
