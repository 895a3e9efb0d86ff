"""Sentences that say what a comparison's statistics support, generated from the rows.

A first sentence counts the comparisons by outcome (`tally`). Each compared row of ours gives
one sentence: the paired Δ with its 95% interval and the number
of paired seeds, then what follows from them: too few seeds (and how many would detect a Δ of
this size at 80% power), no difference shown at alpha = 0.05, or better / worse with the paired
t-test, its Holm adjustment and the probability of improvement. Nothing here is typed by hand.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from benchmark.names import METRIC_FORMATS, PROTOCOLS
from benchmark.reports import stats
from benchmark.reports.tables import format_interval, format_p

Row = Dict[str, Any]
UNITS = {'top1': 'top-1 points', 'davies_bouldin': 'Davies-Bouldin'}


def _seeds_sentence(delta: float, std: Optional[float], n: int) -> str:
    needed = stats.seeds_for_power(delta, std)
    if needed is None:
        return ('a Δ of zero gives no estimate of the seeds needed' if delta == 0
                else 'the paired spread gives no estimate of the seeds needed' if not std
                else 'more than 1000 seeds would be needed to detect a Δ this size')
    if needed <= n:
        return ''
    return f'about {needed} seeds would detect a Δ this size with 80% power'


def verdict(row: Row) -> Optional[str]:
    """One sentence for a row of ours compared seed by seed with its baseline; None otherwise."""
    compare = row.get('compare') or {}
    paired = compare.get('paired')
    if not paired:
        return None
    metric, higher = compare['metric'], compare['higher']
    fmt = METRIC_FORMATS[metric]
    n, delta = paired['n'], paired['delta']
    where = (f"{row['label']} vs {compare['baseline_label']}, "
             f"{PROTOCOLS.get(row['protocol'], row['protocol'])} on {row['eval_data']}")
    interval = format_interval(paired['ci'], fmt, '+')
    head = (f"{where}: Δ {delta:+{fmt}} {UNITS.get(metric, metric)}"
            + (f', 95% CI {interval}' if interval else '') + f', n = {n}')
    if n == 1:
        return f'{head}: one paired seed, no interval and no test; run more seeds.'
    if paired['p_t'] is None:
        more = _seeds_sentence(delta, paired['std'], n)
        return f'{head}: too few seeds to conclude' + (f'; {more}.' if more else '.')
    p_holm = compare.get('p_holm')
    p_holm = paired['p_t'] if p_holm is None else p_holm
    tests = f"paired t-test p = {format_p(paired['p_t'])}, Holm p = {format_p(p_holm)}"
    if p_holm < stats.ALPHA:
        side = 'better' if (delta > 0) == higher else 'worse'
        lo, hi = paired['p_improve_ci'] or (paired['p_improve'], paired['p_improve'])
        return (f"{head}: {side} than {compare['baseline_label']} ({tests}; P(better) = "
                f"{paired['p_improve']:.2f} [{lo:.2f}, {hi:.2f}]).")
    more = _seeds_sentence(delta, paired['std'], n)
    return (f'{head}: no difference shown at alpha = {stats.ALPHA} ({tests})'
            + (f'; {more}.' if more else '.'))


def outcome(row: Row) -> Optional[str]:
    """'better', 'worse', 'not shown' (tested, Holm p >= alpha), 'too few seeds' or None (no
    paired comparison) for a row of ours."""
    compare = row.get('compare') or {}
    paired = compare.get('paired')
    if not paired:
        return None
    if paired['p_t'] is None:
        return 'too few seeds'
    p_holm = paired['p_t'] if compare.get('p_holm') is None else compare['p_holm']
    if p_holm >= stats.ALPHA:
        return 'not shown'
    return 'better' if (paired['delta'] > 0) == compare['higher'] else 'worse'


def tally(rows: Sequence[Row]) -> Optional[str]:
    """One sentence counting the comparisons of `rows` by outcome, naming those shown better or
    worse; None without comparisons."""
    counts: Dict[str, List[str]] = {k: [] for k in ('better', 'worse', 'not shown', 'too few seeds')}
    for row in rows:
        result = outcome(row)
        if result:
            name = (f"{row['label']}, {PROTOCOLS.get(row['protocol'], row['protocol'])} on "
                    f"{row['eval_data']}")
            counts[result].append(name)
    total = sum(len(v) for v in counts.values())
    if not total:
        return None
    named = lambda key: (f" ({'; '.join(counts[key])})" if counts[key] else '')  # noqa: E731
    return (f'Of {total} paired comparisons with the baseline (paired t-test, Holm-adjusted, '
            f"alpha = {stats.ALPHA}): {len(counts['better'])} better{named('better')}, "
            f"{len(counts['worse'])} worse{named('worse')}, {len(counts['not shown'])} without "
            f"a difference shown, {len(counts['too few seeds'])} with too few seeds to test.")


def verdicts(rows: Sequence[Row], protocols: Optional[Sequence[str]] = None) -> List[str]:
    """The sentences of every compared row of ours, in table order (optionally only for
    `protocols`), after one that counts them (`tally`)."""
    chosen = [r for r in rows if protocols is None or r['protocol'] in protocols]
    out = [s for s in (verdict(row) for row in chosen) if s]
    head = tally(chosen)
    return ([head] if head else []) + out
