"""Each leaderboard row against its baseline and against the paper (pure functions on rows).

- A method with a baseline (``names.BASELINES``: MixCo -> MoCo-v2, MixCo on SimCLR -> SimCLR,
  the mix family -> MoCo-v2) is compared with the baseline's row of the same section, evaluation
  data and protocol whose setting is nearest (`choose_baseline`): ``compare`` holds the
  difference of the means and, over the seeds both rows have, `stats.paired_comparison` (the
  per-seed differences, the exact sign-flip test, P(better) as the share of seeds won), and
  names the seeds left out of the pairing and why (``left_out``).
- Comparisons form families within a section (`family_of`, declared by a `StatsPolicy`):
  primary (by default each method run as its suite runs it against its baseline on the
  headline protocols on the pretraining data) and exploratory (the rest: variants, other
  protocols, other evaluation data). Within a family: Holm's adjustment, each Δ interval at
  the level at which Holm judged it (so it agrees with the verdict), equivalence within a
  declared margin, and planning (``plan``: the pooled paired SD with its degrees of freedom,
  the minimal detectable effect, the seeds a verdict needs and those for ``min_effect``).
  ``verdict``: 'better', 'worse', 'equivalent', 'undecided' or 'too few seeds'.
- Where the paper reports the same row (backbone, data, epochs, protocol, method) and ours runs
  the shipped config as it is, ``paper_gap`` holds ours minus the paper's number.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from benchmark.names import BASELINES, protocol_family
from benchmark.reports import stats

SUITE = 'this suite'  # the source of rows built from our records
_MISSING = object()
Row = Dict[str, Any]
SAME_GROUP = ('backbone', 'pretrain_epochs', 'pretrain_data', 'eval_data', 'protocol')
SECTION = SAME_GROUP[:3]  # backbone, epochs, pretraining data: one experiment
# The headline protocols: the primary family's comparisons by default (those a suite has).
DEFAULT_PRIMARY_PROTOCOLS = ('linear_paper', 'linear_fast', 'knn')


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


def _common_overrides(rows: List[Row]) -> Dict[str, Any]:
    """The overrides every row of ours with a setting shares (the suite's own, not a row's)."""
    ours = [r for r in rows if not r['legacy']]
    if not ours:
        return {}
    common = dict(ours[0]['overrides'])
    for row in ours[1:]:
        common = {k: v for k, v in common.items() if row['overrides'].get(k, _MISSING) == v}
    return common


def _mean(row: Row, metric: str) -> Optional[float]:
    stat = row['metrics'].get(metric) or {}
    return stat.get('mean') if stat.get('n') != 0 else None


def _compare(row: Row, base: Row, policy: 'StatsPolicy') -> Optional[Dict[str, Any]]:
    metric, higher = main_metric(row['protocol'])
    mine, theirs = _mean(row, metric), _mean(base, metric)
    if mine is None or theirs is None:
        return None
    paired = None
    if row['source'] == SUITE:
        paired = stats.paired_comparison(row['by_seed'], base['by_seed'], higher,
                                         policy.min_seeds, policy.alpha)
    # round: the paper's two-decimal numbers should not print as 6.859999999999999
    return dict(baseline=base['method'], baseline_label=base['label'], metric=metric,
                higher=higher, delta=round(mine - theirs, 10), paired=paired, p_holm=None,
                family=None, family_size=None, level=None, verdict=None, equivalence=None,
                plan=None, left_out=_left_out(row, base, paired))


def _left_out(row: Row, base: Row, paired: Optional[Dict[str, Any]]) -> List[str]:
    """Why seeds of either row are not in the pairing: diverged or NA there, or only one row
    has the seed."""
    if not paired:
        return []
    used = set(paired['seeds'])
    out = []
    for side in (row, base):
        for seed, reason in sorted((side.get('na_seeds') or {}).items()):
            if seed not in used:
                out.append(f"seed {seed}: {side['label']} {reason}")
    missing = {s for side in (row, base) for s in side.get('na_seeds') or {}}
    for side, other in ((row, base), (base, row)):
        for seed in sorted(set(side['by_seed']) - set(other['by_seed']) - missing):
            out.append(f"seed {seed}: only {side['label']} has it")
    return out


def _paper_gap(row: Row, paper: Row) -> Optional[Dict[str, Any]]:
    metric = main_metric(row['protocol'])[0]
    mine, stat = _mean(row, metric), paper['metrics'].get(metric)
    if mine is None or not stat or stat.get('mean') is None:
        return None
    return dict(delta=round(mine - stat['mean'], 10), paper=stat.get('text') or stat['mean'],
                metric=metric, protocol=row['protocol'], source=paper['source'])


@dataclass(frozen=True)
class StatsPolicy:
    """How comparisons are judged (a suite's `min_seeds`, `min_effect`, `equivalence_margin`,
    `primary` keys; the defaults otherwise).

    - ``min_seeds``: paired seeds a verdict, an interval at a level and P(better) need.
    - ``min_effect``: the smallest Δ of interest, in metric points; the seeds needed to detect
      it with 80% power in its family are planned.
    - ``equivalence_margin``: m > 0 lets a comparison read 'equivalent within ±m'.
    - ``primary_protocols`` / ``primary_eval_data`` / ``primary_methods``: which comparisons
      form the primary family; the rest of a section is exploratory. ``None`` eval data: the
      pretraining data; ``None`` methods: every method with a baseline. Only rows run as their
      suite runs them (no override of their own) are primary.
    """

    min_seeds: int = stats.MIN_SEEDS
    alpha: float = stats.ALPHA
    min_effect: Optional[float] = None
    equivalence_margin: Optional[float] = None
    primary_protocols: Tuple[str, ...] = DEFAULT_PRIMARY_PROTOCOLS
    primary_eval_data: Optional[Tuple[str, ...]] = None
    primary_methods: Optional[Tuple[str, ...]] = None


def family_of(row: Row, policy: StatsPolicy, common: Dict[str, Any]) -> str:
    """'primary' or 'exploratory' for a compared row (`common`: the overrides every row of its
    section shares, which are the suite's, not the row's own)."""
    own = {k: v for k, v in row['overrides'].items() if common.get(k, _MISSING) != v}
    data = policy.primary_eval_data or (row['pretrain_data'],)
    primary = (row['protocol'] in policy.primary_protocols and row['eval_data'] in data
               and (policy.primary_methods is None or row['method'] in policy.primary_methods)
               and not own and not row.get('variant') and not row['legacy'])
    return 'primary' if primary else 'exploratory'


def _judge(members: List[Row], policy: StatsPolicy) -> None:
    """Holm within one family; each comparison's interval at the level Holm judged it, its
    verdict, equivalence, and planning (MDE, seeds for `min_effect`)."""
    size = len(members)  # every member counts, tested or not (an untested one as p = 1)
    pvalues = [r['compare']['paired']['p'] for r in members]
    adjusted = stats.holm([1.0 if p is None else p for p in pvalues])
    levels = stats.holm_levels([1.0 if p is None else p for p in pvalues], policy.alpha)
    for row, p, p_holm, level in zip(members, pvalues, adjusted, levels):
        if p is None:
            continue
        compare, paired = row['compare'], row['compare']['paired']
        interval = stats.signflip_interval(paired['diffs'], level)
        if interval[2] < 1 - level - 1e-12:  # n seeds cannot reach the level Holm judges at:
            paired.update(ci=None, ci_level=None)  # no interval (the range shows, marked)
        else:
            paired.update(ci=interval[:2], ci_level=interval[2])
        compare.update(p_holm=p_holm, level=level)
        if p_holm <= policy.alpha:
            compare['verdict'] = 'better' if (paired['delta'] > 0) == compare['higher'] else 'worse'
    margin = policy.equivalence_margin
    for row in members:
        compare, paired = row['compare'], row['compare']['paired']
        compare.update(family_size=size)
        if not paired['enough']:
            compare['verdict'] = 'too few seeds'
            continue
        if margin and compare['verdict'] is None:
            one_sided = 2 * policy.alpha / size
            low, high, level = stats.signflip_interval(paired['diffs'], one_sided)
            reached = level >= 1 - one_sided - 1e-12
            compare['equivalence'] = dict(margin=margin, ci=(low, high), level=level,
                                          reached=reached)
            if reached and -margin < low and high < margin:
                compare['verdict'] = 'equivalent'
        if compare['verdict'] is None:
            compare['verdict'] = 'undecided'
    by_task: Dict[tuple, List[Row]] = {}
    for row in members:
        by_task.setdefault((row['protocol'], row['eval_data']), []).append(row)
    for rows in by_task.values():
        sd, df = stats.pooled_sd([(r['compare']['paired']['std'], r['compare']['paired']['n'])
                                  for r in rows])
        for row in rows:
            n = row['compare']['paired']['n']
            need = max(policy.min_seeds, stats.seeds_for_level(policy.alpha / size))
            row['compare']['plan'] = dict(
                sd=sd, df=df, alpha=policy.alpha / size, seeds_for_verdict=need,
                mde=stats.minimal_detectable_effect(n, sd, policy.alpha / size)
                if n >= need else None,
                min_effect=policy.min_effect,
                seeds_for_min_effect=stats.seeds_for_effect(policy.min_effect, sd,
                                                            policy.alpha / size)
                if policy.min_effect else None)


def add_comparisons(rows: List[Row], policy: Optional[StatsPolicy] = None) -> None:
    """Set ``compare`` and ``paper_gap`` on every row (None where there is none), in place.

    Rows whose status is not 'ok' neither get nor serve as a baseline; our rows are compared
    with ours, the paper's with the paper's. Each compared row of ours belongs to a family
    (`family_of`: primary or exploratory) within its section (backbone, epochs, pretraining
    data); Holm's adjustment, the intervals' levels and the planning run within each family.
    """
    policy = policy or StatsPolicy()
    ok: Dict[tuple, List[Row]] = {}
    for row in rows:
        row['compare'] = row['paper_gap'] = None
        if row['source'] == SUITE:
            row['min_seeds'] = policy.min_seeds
        if row['status'] == 'ok':
            key = tuple(row[k] for k in SAME_GROUP) + (row['method'], row['source'] == SUITE,
                                                       row.get('protocol_settings', ''))
            ok.setdefault(key, []).append(row)
    for row in rows:
        baseline = BASELINES.get(row['method'])
        if baseline is None or row['status'] != 'ok':
            continue
        key = tuple(row[k] for k in SAME_GROUP) + (baseline, row['source'] == SUITE,
                                                   row.get('protocol_settings', ''))
        base = choose_baseline(row, ok.get(key, []))
        if base is not None:
            row['compare'] = _compare(row, base, policy)
    sections: Dict[tuple, List[Row]] = {}
    for row in rows:
        if row['source'] == SUITE:
            sections.setdefault(tuple(row[k] for k in SECTION), []).append(row)
    families: Dict[tuple, List[Row]] = {}
    for section, members in sections.items():
        common = _common_overrides(members)
        for row in members:
            if (row['compare'] or {}).get('paired'):
                name = family_of(row, policy, common)
                row['compare']['family'] = name
                families.setdefault(section + (name,), []).append(row)
    for members in families.values():
        _judge(members, policy)
    paper = {tuple(r[k] for k in SAME_GROUP) + (r['method'],): r
             for r in rows if r['source'] != SUITE}
    for row in rows:
        as_shipped = not row['overrides'] and not row.get('variant')
        if row['source'] == SUITE and row['status'] == 'ok' and as_shipped:
            other = paper.get(tuple(row[k] for k in SAME_GROUP) + (row['method'],))
            if other is not None:
                row['paper_gap'] = _paper_gap(row, other)
