"""Each leaderboard row against its baseline and against the paper (pure functions on rows).

- A method with a baseline (``names.BASELINES``: MixCo -> MoCo-v2, MixCo on SimCLR -> SimCLR,
  the mix family -> MoCo-v2) is compared with the baseline's row of the same section, evaluation
  data and protocol whose setting is nearest (`choose_baseline`): ``compare`` holds the
  difference of the means and, over the seeds both rows have, `stats.paired_comparison` (paired
  Δ with its t interval, paired t-test, Wilcoxon for n >= 6, probability of improvement with a
  bootstrap interval, or the seeds needed when fewer than 3 are paired).
- The paired t-test p-values of one table (a section's accuracy or cluster table) are adjusted
  together by Holm's method (``compare['p_holm']``).
- Where the paper reports the same row (backbone, data, epochs, protocol, method) and ours runs
  the shipped config as it is, ``paper_gap`` holds ours minus the paper's number.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchmark.names import BASELINES, protocol_family
from benchmark.reports import stats

SUITE = 'this suite'  # the source of rows built from our records
_MISSING = object()
Row = Dict[str, Any]
SAME_GROUP = ('backbone', 'pretrain_epochs', 'pretrain_data', 'eval_data', 'protocol')


def main_metric(protocol: str) -> Tuple[str, bool]:
    """The metric comparisons are made on, and whether higher is better."""
    return ('davies_bouldin', False) if protocol_family(protocol) == 'cluster' else ('top1', True)


def config_family(row: Row) -> str:
    """The config name without its method: 'r18_tiny_fast' for mixco_r18_tiny_fast.py."""
    stem = re.sub(r'\.py$', '', str(row.get('config') or '').rsplit('/', 1)[-1])
    prefix = f"{row['method']}_"
    return stem[len(prefix):] if stem.startswith(prefix) else stem


def choose_baseline(row: Row, candidates: List[Row]) -> Optional[Row]:
    """The candidate (a row of the baseline method) nearest to `row`'s setting: fewest
    overrides `row` does not share, the same suite variant (older records), the same number of
    processes, the same config family, most overrides shared, the same kind of record (older
    records without a setting with older ones)."""
    def distance(other: Row) -> Tuple:
        mine, theirs = row['overrides'], other['overrides']
        foreign = sum(1 for k, v in theirs.items() if mine.get(k, _MISSING) != v)
        shared = sum(1 for k, v in theirs.items() if mine.get(k, _MISSING) == v)
        variant = other.get('variant', '')
        return (foreign, 0 if variant == row.get('variant', '') else 1 if not variant else 2,
                other['world_size'] != row['world_size'],
                config_family(other) != config_family(row), -shared,
                other['legacy'] != row['legacy'])
    return min(candidates, key=distance) if candidates else None


def _mean(row: Row, metric: str) -> Optional[float]:
    stat = row['metrics'].get(metric) or {}
    return stat.get('mean') if stat.get('n') != 0 else None


def _compare(row: Row, base: Row) -> Optional[Dict[str, Any]]:
    metric, higher = main_metric(row['protocol'])
    mine, theirs = _mean(row, metric), _mean(base, metric)
    if mine is None or theirs is None:
        return None
    paired = None
    if row['source'] == SUITE:
        paired = stats.paired_comparison(row['by_seed'], base['by_seed'], higher)
    # round: the paper's two-decimal numbers should not print as 6.859999999999999
    return dict(baseline=base['method'], baseline_label=base['label'], metric=metric,
                higher=higher, delta=round(mine - theirs, 10), paired=paired, p_holm=None)


def _paper_gap(row: Row, paper: Row) -> Optional[Dict[str, Any]]:
    metric = main_metric(row['protocol'])[0]
    mine, stat = _mean(row, metric), paper['metrics'].get(metric)
    if mine is None or not stat or stat.get('mean') is None:
        return None
    return dict(delta=round(mine - stat['mean'], 10), paper=stat.get('text') or stat['mean'],
                metric=metric, protocol=row['protocol'], source=paper['source'])


def add_comparisons(rows: List[Row], table_of: Callable[[Row], tuple]) -> None:
    """Set ``compare`` and ``paper_gap`` on every row (None where there is none), in place.

    Rows whose status is not 'ok' neither get nor serve as a baseline; our rows are compared
    with ours, the paper's with the paper's. `table_of(row)` names the table a row is printed
    in: Holm's adjustment runs over the paired t-tests of each table.
    """
    ok: Dict[tuple, List[Row]] = {}
    for row in rows:
        row['compare'] = row['paper_gap'] = None
        if row['status'] == 'ok':
            key = tuple(row[k] for k in SAME_GROUP) + (row['method'], row['source'] == SUITE)
            ok.setdefault(key, []).append(row)
    for row in rows:
        baseline = BASELINES.get(row['method'])
        if baseline is None or row['status'] != 'ok':
            continue
        key = tuple(row[k] for k in SAME_GROUP) + (baseline, row['source'] == SUITE)
        base = choose_baseline(row, ok.get(key, []))
        if base is not None:
            row['compare'] = _compare(row, base)
    tables: Dict[tuple, List[Row]] = {}
    for row in rows:
        paired = (row['compare'] or {}).get('paired')
        if paired and paired.get('p_t') is not None:
            tables.setdefault(table_of(row), []).append(row)
    for members in tables.values():
        adjusted = stats.holm([r['compare']['paired']['p_t'] for r in members])
        for row, p in zip(members, adjusted):
            row['compare']['p_holm'] = p
    paper = {tuple(r[k] for k in SAME_GROUP) + (r['method'],): r
             for r in rows if r['source'] != SUITE}
    for row in rows:
        as_shipped = not row['overrides'] and not row.get('variant')
        if row['source'] == SUITE and row['status'] == 'ok' and as_shipped:
            other = paper.get(tuple(row[k] for k in SAME_GROUP) + (row['method'],))
            if other is not None:
                row['paper_gap'] = _paper_gap(row, other)
