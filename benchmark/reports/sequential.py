"""A group-sequential design over seeds: when to look, what level each look is judged at, and
what each look decides (pure functions; ``benchmark.suites.until_decided`` runs the seeds).

Seeds are added in rounds and the primary family is judged at each look. Looking repeatedly at
a growing set of seeds and stopping once a comparison reads better or worse would inflate the
error rate if every look used the full alpha. Here the family's alpha is *spent* over the
looks planned in advance (Lan & DeMets 1983): look i, at n_i of at most N seeds, may use
``alpha_i = A(n_i / N) - A(n_(i-1) / N)`` with the linear spending function ``A(t) = alpha t``
(the power family of Kim & DeMets 1987 with rho = 1). Each look judges the whole family on
the design's first n_i seeds with the exact sign-flip test and Holm at alpha_i, comparisons
decided before counting as p = 1; Holm being monotone, its better/worse verdicts are a subset
of what Holm on the look's own p-values would say, so (unconditionally) a false one at look i
has probability at most alpha_i and over all looks at most ``sum(alpha_i) = alpha`` (a
Bonferroni bound over the looks; an exact joint boundary over the looks could be tighter). A
comparison is decided at the first look where it reads better, worse or (with a declared
margin) equivalent at that look's level; it keeps that decision. A look at which no verdict is
possible (the sign-flip test's smallest p above its level) is left out of the design and its
alpha goes to the next look.

The first look is the first n (at least min_seeds and the seeds already recorded) at which the
sign-flip test can reach its level (2 / 2^n <= alpha_1 / m for a family of m); then one look
every `round` seeds, the last at N.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmark.names import PROTOCOLS
from benchmark.reports import stats
from benchmark.reports.comparisons import StatsPolicy
from benchmark.reports.leaderboard import build_rows

SPENDING = 'linear alpha spending A(t) = alpha t (Lan-DeMets; Kim-DeMets power family, rho = 1)'
DECIDED = ('better', 'worse', 'equivalent')
Key = Tuple[str, str, str, str]  # method, evaluation data, protocol, protocol settings


@dataclass(frozen=True)
class Design:
    """The looks (seeds per method at each) and the level of each, fixed before the first."""

    alpha: float
    max_seeds: int
    round: int
    family_size: int
    looks: Tuple[int, ...]
    alphas: Tuple[float, ...]

    def as_dict(self) -> Dict[str, Any]:
        return dict(asdict(self), looks=list(self.looks), alphas=list(self.alphas),
                    spending=SPENDING)


def spent(n: int, max_seeds: int, alpha: float) -> float:
    """A(n / N): the alpha spent up to a look at n of at most N seeds."""
    return alpha * min(n, max_seeds) / max_seeds


def smallest_p(n: int) -> float:
    """The smallest two-sided p of the exact sign-flip test at n paired seeds."""
    return 2.0 / (1 << n)


def make_design(start: int, max_seeds: int, round_size: int, family_size: int,
                alpha: float = 0.05, min_seeds: int = 5) -> Design:
    """The design for a family of `family_size` comparisons with `start` seeds recorded.

    Raises:
        ValueError: No look up to max_seeds could reach a verdict (max_seeds too small).
    """
    if round_size < 1:
        raise ValueError(f'--round {round_size}: add at least 1 seed per round')
    if start > max_seeds:
        raise ValueError(f'{start} seeds of every method are recorded already, more than '
                         f'--max-seeds {max_seeds}: raise --max-seeds to at least {start}')
    first = max(start, min_seeds, 2)
    while first <= max_seeds and smallest_p(first) > spent(first, max_seeds, alpha) / family_size:
        first += 1
    if first > max_seeds:
        need = first
        while smallest_p(need) > spent(need, need, alpha) / family_size:
            need += 1
        raise ValueError(f'--max-seeds {max_seeds} is too few for a verdict: a family of '
                         f'{family_size} comparison(s) at alpha {alpha:g} needs at least {need} '
                         'paired seeds at its last look')
    looks: List[int] = []
    alphas: List[float] = []
    before = 0.0
    for n in list(range(first, max_seeds, round_size)) + [max_seeds]:
        level = spent(n, max_seeds, alpha) - before
        if n < max_seeds and smallest_p(n) > level / family_size:
            continue  # no verdict possible at this look: its alpha goes to the next one
        looks.append(n)
        alphas.append(level)
        before = spent(n, max_seeds, alpha)
    return Design(alpha, max_seeds, round_size, family_size, tuple(looks), tuple(alphas))


def design_from(data: Dict[str, Any]) -> Design:
    return Design(float(data['alpha']), int(data['max_seeds']), int(data['round']),
                  int(data['family_size']), tuple(int(n) for n in data['looks']),
                  tuple(float(a) for a in data['alphas']))


def key_of(row: Dict[str, Any]) -> Key:
    return (row['method'], row['eval_data'], row['protocol'], row.get('protocol_settings', ''))


def primary(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The rows whose comparison is in the primary family."""
    return [r for r in rows if (r.get('compare') or {}).get('family') == 'primary']


def judge(records: Sequence[dict], policy: StatsPolicy, level: float,
          closed: Sequence[str] = (), seeds: Optional[Sequence[int]] = None
          ) -> Dict[Key, Dict]:
    """Each primary comparison judged at `level` on the records of `seeds` (the design's first
    n; None: all), Holm within the family with the comparisons decided at earlier looks
    (`closed`, '|'-joined keys) counted as p = 1: {key: dict(verdict, n, delta, p, p_holm,
    baseline)}. Holm is monotone, so this rejects no more than Holm on the look's own p-values
    would: a false verdict at a look has probability at most its level."""
    if seeds is not None:
        chosen = set(seeds)
        records = [r for r in records if int(r['seed']) in chosen]
    rows = primary(build_rows(records, (), replace(policy, alpha=level)))
    pvalues = [1.0 if '|'.join(key_of(r)) in closed or r['compare']['paired']['p'] is None
               else r['compare']['paired']['p'] for r in rows]
    out = {}
    for row, p_holm in zip(rows, stats.holm(pvalues)):
        compare, paired = row['compare'], row['compare']['paired']
        if not paired['enough']:
            verdict = 'too few seeds'
        elif p_holm <= level:
            verdict = 'better' if (paired['delta'] > 0) == compare['higher'] else 'worse'
        elif compare['verdict'] == 'equivalent':
            verdict = 'equivalent'
        else:
            verdict = 'undecided'
        out[key_of(row)] = dict(verdict=verdict, n=paired['n'], delta=paired['delta'],
                                p=paired['p'], p_holm=p_holm, baseline=compare['baseline'])
    return out


def family_size(records: Sequence[dict], policy: StatsPolicy) -> int:
    return len(primary(build_rows(records, (), policy)))


def take_look(state: Dict[str, Any], design: Design, index: int, judged: Dict[Key, Dict]
              ) -> Dict[str, Any]:
    """The look's entry: the comparisons it decides (those not decided before)."""
    before = decided(state)
    return dict(look=index + 1, seeds=design.looks[index], alpha=design.alphas[index],
                judged={'|'.join(k): v for k, v in judged.items()},
                decided=['|'.join(k) for k, v in judged.items()
                         if v['verdict'] in DECIDED and '|'.join(k) not in before])


def decided(state: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """{comparison: dict(verdict, look, seeds, alpha, ...)} of the looks taken so far."""
    out: Dict[str, Dict[str, Any]] = {}
    for look in state.get('looks', []):
        for key in look['decided']:
            out.setdefault(key, dict(look['judged'][key], look=look['look'],
                                     seeds=look['seeds'], alpha=look['alpha']))
    return out


def open_comparisons(state: Dict[str, Any]) -> List[str]:
    """The comparisons of the last look not decided yet."""
    if not state.get('looks'):
        return []
    done = decided(state)
    return [k for k in state['looks'][-1]['judged'] if k not in done]


def plan_lines(design: Design, methods: int, have: int) -> List[str]:
    """What a dry run prints: the looks, their levels, the most runs."""
    lines = [f'sequential design: {SPENDING}; family of {design.family_size} primary '
             f'comparison(s), alpha {design.alpha:g}; at most {design.max_seeds} seeds per method, '
             f'{design.round} per round']
    before = have
    for i, (n, level) in enumerate(zip(design.looks, design.alphas), 1):
        lines.append(f'  look {i} at {n} seeds: level {level:.4g} (Holm over the family; '
                     f'smallest p possible {smallest_p(n):.3g}); up to {max(n - before, 0)} '
                     f'seed(s) x {methods} method(s) = {max(n - before, 0) * methods} run(s) '
                     'before it')
        before = n
    lines.append(f'at most {max(design.max_seeds - have, 0) * methods} run(s) in all; a '
                 "method stops getting seeds once every comparison it is in is decided")
    return lines


def summary_lines(state: Dict[str, Any], label: Optional[Callable[[str], str]] = None
                  ) -> List[str]:
    """The page's block: each primary comparison, decided at which look with how many seeds."""
    design = design_from(state['design'])
    done = decided(state)
    last = state['looks'][-1] if state.get('looks') else None
    lines = [f"**Seeds until decided** ({SPENDING}; family of {design.family_size}, alpha "
             f"{design.alpha:g}; looks at {', '.join(str(n) for n in design.looks)} seeds, "
             f"{len(state.get('looks', []))} taken):", '',
             '| comparison | decision | look | paired seeds | level at that look | Δ | '
             'p (sign-flip) | p Holm |', '|---|---|---|---|---|---|---|---|']
    keys = list(last['judged']) if last else []
    name_of = label or (lambda method: method)
    for key in keys:
        method, data, protocol, _ = key.split('|')
        name = (f"{name_of(method)} vs {name_of(last['judged'][key]['baseline'])}, "
                f'{PROTOCOLS.get(protocol, protocol)} on {data}')
        if key in done:
            d = done[key]
            lines.append(f"| {name} | {d['verdict']} | {d['look']} | {d['n']} | "
                         f"{d['alpha']:.4g} | {d['delta']:+.2f} | {d['p']:.3g} | "
                         f"{d['p_holm']:.3g} |")
        else:
            j = last['judged'][key]
            ended = last['look'] == len(design.looks)
            lines.append(f"| {name} | {'undecided at the last look' if ended else 'open'} | "
                         f"{last['look']} | {j['n']} | {last['alpha']:.4g} | "
                         f"{j['delta']:+.2f} | {'' if j['p'] is None else format(j['p'], '.3g')}"
                         f" | {'' if j['p_holm'] is None else format(j['p_holm'], '.3g')} |")
    lines += ['', 'A decision holds at the level of the look that made it; the family\'s error '
              'over every look is at most alpha. The tables\' verdicts above judge the final '
              'seeds as a fixed design and do not account for the looks.', '']
    return lines
