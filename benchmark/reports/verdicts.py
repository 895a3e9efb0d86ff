"""Sentences that say what a comparison's statistics support, generated from the rows.

Each compared row of ours gives one sentence: the paired Δ with its 95% interval and the number
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


def verdicts(rows: Sequence[Row], protocols: Optional[Sequence[str]] = None) -> List[str]:
    """The sentences of every compared row of ours, in table order (optionally only for
    `protocols`)."""
    out = []
    for row in rows:
        if protocols is not None and row['protocol'] not in protocols:
            continue
        sentence = verdict(row)
        if sentence:
            out.append(sentence)
    return out
