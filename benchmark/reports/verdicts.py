"""Sentences that say what a comparison's statistics support, generated from the rows.

A page lists a sentence for each comparison that reached a verdict (better, worse,
equivalent) and one line counting the rest (`tally`), whose numbers the table holds. A compared
row of ours gives its sentence with `verdict`: where it stands (method, baseline, protocol,
data, family), the paired Δ, and then the verdict with what it rests on: under the suite's
``min_seeds`` the seeds' differences and how many more seeds any verdict needs; else the
interval at the level Holm judged it, the sign-flip p-value with its Holm adjustment, and
better / worse / equivalent within the margin / undecided, with the minimal detectable effect
and the seeds a declared smallest effect needs. Seeds left out of the pairing are named.
Nothing here is typed by hand.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from benchmark.names import METRIC_FORMATS, PROTOCOLS
from benchmark.reports.tables import format_interval, format_level, format_p, signed

Row = Dict[str, Any]
UNITS = {'top1': 'top-1 points', 'davies_bouldin': 'Davies-Bouldin'}
OUTCOMES = ('better', 'worse', 'equivalent', 'undecided', 'too few seeds')


def _where(row: Row, compare: Dict[str, Any]) -> str:
    return (f"{row['label']} vs {compare['baseline_label']}, "
            f"{PROTOCOLS.get(row['protocol'], row['protocol'])} on {row['eval_data']}")


def _plan_sentence(compare: Dict[str, Any], fmt: str, units: str) -> str:
    """What the seeds at hand can detect, and what a declared smallest effect would need."""
    plan, n = compare.get('plan') or {}, compare['paired']['n']
    if not plan or plan.get('sd') is None:
        return 'no paired spread to plan from'
    where = (f"paired SD {plan['sd']:{fmt}} pooled over the family's comparisons of this "
             f"protocol, {plan['df']} df; level {format_p(plan['alpha'])}")
    parts = []
    mde = plan.get('mde')
    if mde is not None:
        parts.append(f'at n = {n} a true Δ of {mde:{fmt}} {units} would be found with 80% power'
                     if math.isfinite(mde) else f'at n = {n} no true Δ can be found at this level')
    if plan.get('min_effect'):
        need = plan.get('seeds_for_min_effect')
        parts.append(f"{need} paired seeds would find the smallest effect of interest "
                     f"({plan['min_effect']:{fmt}}) with 80% power" if need else
                     f"more than 1000 seeds would be needed for the smallest effect of "
                     f"interest ({plan['min_effect']:{fmt}})")
    return '; '.join(parts) + f' ({where})' if parts else ''


def _equals(p: float) -> str:
    """'= 0.031', or '< 0.0001' (never '= < 0.0001')."""
    text = format_p(p)
    return text if text.startswith('<') else f'= {text}'


def verdict(row: Row) -> Optional[str]:
    """One sentence for a row of ours compared seed by seed with its baseline; None otherwise."""
    compare = row.get('compare') or {}
    paired = compare.get('paired')
    if not paired:
        return None
    metric, fmt = compare['metric'], METRIC_FORMATS[compare['metric']]
    units = UNITS.get(metric, metric)
    n, delta = paired['n'], paired['delta']
    family = (f" ({compare['family']} family of {compare['family_size']})"
              if compare.get('family') else '')
    head = f"{_where(row, compare)}{family}: Δ {signed(delta, fmt)} {units}, n = {n}"
    left = ('; left out of the pairing: ' + '; '.join(compare['left_out'])
            if compare.get('left_out') else '')
    result = compare.get('verdict')
    if result == 'too few seeds' or result is None:
        per_seed = ', '.join(f'{signed(d, fmt)}' for d in paired['diffs'])
        need = (compare.get('plan') or {}).get('seeds_for_verdict') or paired['min_seeds']
        return (f"{head} (per seed {per_seed}): too few seeds for a verdict (min_seeds "
                f"{paired['min_seeds']}); {need} paired seeds would make one possible at this "
                f"family's level{left}.")
    interval = (f"{format_interval(paired['ci'], fmt, '+')} ({format_level(paired['ci_level'])} "
                'sign-flip interval)' if paired['ci'] else
                f"per seed {', '.join(f'{signed(d, fmt)}' for d in paired['diffs'])} (no interval at "
                f"the family's level from {n} seeds)")
    tests = f"sign-flip p {_equals(paired['p'])}, Holm p {_equals(compare['p_holm'])}"
    if result in ('better', 'worse'):
        share = paired['wins']
        return (f"{head}, {interval}: {result} than {compare['baseline_label']} ({tests}; "
                f"P(better) = {share['share']:.2f} "
                f"{format_interval(share['ci'], '.2f')}){left}.")
    if result == 'equivalent':
        eq = compare['equivalence']
        return (f"{head}, {interval}: equivalent within ±{eq['margin']:{fmt}} (the "
                f"{format_level(eq['level'])} interval {format_interval(eq['ci'], fmt, '+')} "
                f"lies inside the margin; {tests}){left}.")
    plan = _plan_sentence(compare, fmt, units)
    margin = ''
    if compare.get('equivalence'):
        eq = compare['equivalence']
        margin = (f"; not shown equivalent within ±{eq['margin']:{fmt}} "
                  f"({format_level(eq['level'])} interval "
                  f"{format_interval(eq['ci'], fmt, '+')})")
    return (f"{head}, {interval}: undecided with {n} seeds ({tests}){margin}"
            + (f'; {plan}' if plan else '') + f'{left}.')


def outcome(row: Row) -> Optional[str]:
    """The verdict of a row of ours ('better', 'worse', 'equivalent', 'undecided', 'too few
    seeds'), or None (no paired comparison)."""
    compare = row.get('compare') or {}
    return compare.get('verdict') if compare.get('paired') else None


DECIDED = ('better', 'worse', 'equivalent')


def tally(rows: Sequence[Row]) -> Optional[str]:
    """One line counting the comparisons that reached no verdict, family by family ('19
    comparisons undecided or with too few seeds (primary family: 2 undecided; exploratory
    family: 17 too few seeds): see the table.'); None where every comparison was decided."""
    families: Dict[str, Dict[str, int]] = {}
    for row in rows:
        result = outcome(row)
        if result and result not in DECIDED:
            family = families.setdefault(row['compare'].get('family') or 'all', {})
            family[result] = family.get(result, 0) + 1
    total = sum(n for counts in families.values() for n in counts.values())
    if not total:
        return None
    parts = '; '.join(
        f'{family} family: ' + ', '.join(f'{counts[k]} {k}' for k in OUTCOMES if k in counts)
        for family, counts in sorted(families.items(), key=lambda f: (f[0] != 'primary', f[0])))
    return (f"{total} comparison{'s' * (total > 1)} undecided or with too few seeds ({parts}): "
            'see the table.')


def verdicts(rows: Sequence[Row], protocols: Optional[Sequence[str]] = None) -> List[str]:
    """A sentence for each comparison of ours that reached a verdict (better, worse,
    equivalent), in table order (optionally only for `protocols`), then one line counting the
    rest (`tally`)."""
    chosen = [r for r in rows if protocols is None or r['protocol'] in protocols]
    out = [verdict(row) for row in chosen if outcome(row) in DECIDED]
    rest = tally(chosen)
    return out + ([rest] if rest else [])
