"""The generated verdicts: each branch of `verdict` (too few seeds and the seeds a verdict needs;
better / worse after Holm within the family; equivalent within a declared margin; undecided with
what the seeds could detect) against numbers computed here by enumerating sign patterns, with
scipy's exact binomial interval and a naive Holm loop; `tally` per family; `verdicts` in table
order and filtered by protocol."""
import math
import re

import numpy as np
import pytest

from benchmark.layout import PAPER_RESULTS
from benchmark.reports.comparisons import StatsPolicy
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.records import build_record
from benchmark.reports.render import read_paper
from benchmark.reports.verdicts import tally, verdict, verdicts
from tests.reports.references import clopper_pearson, inverted, naive_holm, sign_p

pytestmark = pytest.mark.usefixtures('quick_provenance')

BASE = {0: 40.0, 1: 41.0, 2: 39.5, 3: 40.2, 4: 40.7, 5: 39.9, 6: 40.4, 7: 40.1}
# Sentences name a method by its label in benchmark/names.py METHODS.
MIXCO, IMIX, MOCO = 'MixCo (MoCo-v2)', 'i-Mix (MoCo-v2)', 'MoCo-v2'


def series(method, values, protocol='linear_paper', eval_data='tiny-imagenet'):
    if protocol == 'cluster':
        metrics = lambda v: dict(davies_bouldin=v, calinski_harabasz=10.0, kmeans_nmi=0.5,
                                 kmeans_ari=0.25)
    else:
        metrics = lambda v: {'top1': v}
    return [build_record(method=method, backbone='resnet18', pretrain_data='tiny-imagenet',
                         pretrain_epochs=100, eval_data=eval_data, seed=seed, world_size=2,
                         total_batch=128, config=f'{method}_r18_tiny.py',
                         setting_text=f'{method} shipped', overrides={},
                         protocols={protocol: {'settings': {}, 'metrics': metrics(v)}})
            for seed, v in values.items()]


def base(n, values=BASE):
    return {s: values[s] for s in sorted(values)[:n]}


def shifted(diffs, values=BASE):
    return {s: values[s] + d for s, d in zip(sorted(values), diffs)}


def row_of(rows, method, protocol='linear_paper'):
    return next(r for r in rows if r['method'] == method and r['protocol'] == protocol
                and r['source'] == 'this suite')


# Independent references

def p_text(p):
    return '< 0.0001' if p < 1e-4 else f'{p:.2g}'


def interval_text(diffs, alpha, fmt='.2f'):
    low, high, level = inverted(diffs, alpha)
    return f'[{low:+{fmt}}, {high:+{fmt}}] ({100 * level:.3g}% sign-flip interval)'


def holm_level(pvalues, i, alpha=0.05):
    """The level Holm's loop judged test i at: alpha/(m - k) at its step k, or at the step
    where the loop stopped."""
    order = sorted(range(len(pvalues)), key=lambda j: pvalues[j])
    for step, j in enumerate(order):
        level = alpha / (len(pvalues) - step)
        if pvalues[j] > level or j == i:
            return level


def fewest_seeds(alpha):
    return next(n for n in range(1, 64) if 2 / 2 ** n <= alpha)


def head(label, diffs, family='primary family of 1', protocol='linear (paper protocol)',
         unit='top-1 points', fmt='.2f'):
    return (f'{label} vs {MOCO}, {protocol} on tiny-imagenet ({family}): '
            f'Δ {float(np.mean(diffs)):+{fmt}} {unit}, n = {len(diffs)}')


# The branches

def check_too_few(sentence, label, diffs, need, family='primary family of 1'):
    """Under min_seeds: the differences seed by seed and how many seeds a verdict needs (in
    all, or how many more), nothing else."""
    per_seed = ', '.join(f'{d:+.2f}' for d in diffs)
    assert sentence.startswith(f'{head(label, diffs, family)} (per seed {per_seed}): ')
    assert 'min_seeds 5' in sentence or 'the 5 paired seeds' in sentence
    assert re.search(rf'\b({need - len(diffs)} more|{need} paired seeds)\b', sentence), sentence
    for claim in ('P(better)', 'sign-flip p', 'better than', 'worse than', 'undecided'):
        assert claim not in sentence


def test_one_paired_seed():
    rows = build_rows(series('mocov2', {0: 40.0}) + series('mixco', {0: 42.5}))
    check_too_few(verdict(row_of(rows, 'mixco')), MIXCO, [2.5], max(5, fewest_seeds(0.05)))
    assert verdict(row_of(rows, 'mocov2')) is None  # a baseline has no comparison


def test_two_paired_seeds_say_how_many_seeds_a_verdict_needs():
    rows = build_rows(series('mocov2', {0: 40.0, 1: 41.0})
                      + series('mixco', {0: 42.0, 1: 44.5}))
    assert max(5, fewest_seeds(0.05)) == 6
    check_too_few(verdict(row_of(rows, 'mixco')), MIXCO, [2.0, 3.5], 6)
    # Two comparisons in the family: each must be able to reach 0.05 / 2, which takes 7 seeds.
    rows = build_rows(series('mocov2', {0: 40.0, 1: 41.0})
                      + series('mixco', {0: 42.0, 1: 44.5}) + series('imix', {0: 41.0, 1: 40.0}))
    assert fewest_seeds(0.025) == 7
    check_too_few(verdict(row_of(rows, 'imix')), IMIX, [1.0, -1.0], 7,
                  'primary family of 2')


@pytest.mark.parametrize('sign, side', [(1, 'better'), (-1, 'worse')])
def test_significant_after_holm_is_better_or_worse(sign, side):
    strong = [sign * d for d in (3.0, 3.4, 2.8, 3.3, 3.1, 2.9, 3.2)]
    weak = [0.4, -0.9, 1.1, 0.2, -0.3, 0.6, -0.5]
    seven = base(7)
    rows = build_rows(series('mocov2', seven) + series('mixco', shifted(strong, seven))
                      + series('imix', shifted(weak, seven)))
    p = [sign_p(strong), sign_p(weak)]
    holm_strong, holm_weak = naive_holm(p)
    assert p[0] == 2 / 2 ** 7 and holm_strong < 0.05 <= holm_weak and holm_strong != p[0]
    won = 7 if sign > 0 else 0
    low, high = clopper_pearson(won, 7)
    assert verdict(row_of(rows, 'mixco')) == (
        f"{head(MIXCO, strong, 'primary family of 2')}, "
        f"{interval_text(strong, holm_level(p, 0))}: {side} than {MOCO} (sign-flip p = "
        f"{p_text(p[0])}, Holm p = {p_text(holm_strong)}; P(better) = {won / 7:.2f} "
        f"[{low:.2f}, {high:.2f}]).")
    sentence = verdict(row_of(rows, 'imix'))
    assert sentence.startswith(
        f"{head(IMIX, weak, 'primary family of 2')}, {interval_text(weak, holm_level(p, 1))}: "
        f"undecided with 7 seeds (sign-flip p = {p_text(p[1])}, Holm p = {p_text(holm_weak)}); ")
    sd = math.sqrt((np.var(strong, ddof=1) * 6 + np.var(weak, ddof=1) * 6) / 12)
    assert sentence.endswith(
        f" top-1 points would be found with 80% power (paired SD {sd:.2f} pooled over the "
        "family's comparisons of this protocol, 12 df; level 0.025).")


def test_a_lower_davies_bouldin_is_better():
    values = {s: 2.0 + 0.05 * s for s in range(6)}
    diffs = [-0.30, -0.35, -0.28, -0.31, -0.33, -0.29]
    rows = build_rows(series('mocov2', values, protocol='cluster')
                      + series('mixco', shifted(diffs, values), protocol='cluster'))
    p = sign_p(diffs)
    assert p == 2 / 2 ** 6
    low, high = clopper_pearson(6, 6)  # every seed lower: won
    start = head(MIXCO, diffs, 'exploratory family of 1', 'cluster indices', 'Davies-Bouldin',
                 '.3f')
    assert verdict(row_of(rows, 'mixco', 'cluster')) == (
        f"{start}, {interval_text(diffs, 0.05, '.3f')}: better than {MOCO} (sign-flip p = "
        f"{p_text(p)}, Holm p = {p_text(p)}; P(better) = 1.00 [{low:.2f}, {high:.2f}]).")


def test_holm_can_take_a_nominal_difference_back():
    """p < 0.05 alone, but not once the family's other tests are counted: undecided, with the
    interval at the level Holm stopped at (it holds 0) and what 7 seeds could detect."""
    diffs = [1.0, 2.5, 3.5, 2.0, 1.5, 3.0, -0.5]
    others = ([1.0, -0.5, 0.2, 0.3, -0.4, 0.1, 0.6], [0.3, -0.4, 0.5, -0.1, 0.2, -0.6, 0.1])
    seven = base(7)
    rows = build_rows(series('mocov2', seven) + series('mixco', shifted(diffs, seven))
                      + series('imix', shifted(others[0], seven))
                      + series('unmix', shifted(others[1], seven)))
    p = [sign_p(d) for d in (diffs,) + others]
    adjusted = naive_holm(p)[0]
    assert p[0] == 4 / 2 ** 7 < 0.05 <= adjusted
    low, high, _ = inverted(diffs, holm_level(p, 0))
    assert low < 0 < high
    sd = math.sqrt(sum(np.var(d, ddof=1) * 6 for d in (diffs,) + others) / 18)
    mde = row_of(rows, 'mixco')['compare']['plan']['mde']
    assert verdict(row_of(rows, 'mixco')) == (
        f"{head(MIXCO, diffs, 'primary family of 3')}, {interval_text(diffs, holm_level(p, 0))}"
        f": undecided with 7 seeds (sign-flip p = {p_text(p[0])}, Holm p = {p_text(adjusted)}); "
        f"at n = 7 a true Δ of {mde:.2f} top-1 points would be found with 80% power (paired SD "
        f"{sd:.2f} pooled over the family's comparisons of this protocol, 18 df; level 0.017).")


def test_equivalent_within_a_declared_margin_and_undecided_without():
    diffs = [0.1, -0.1, 0.05, -0.05, 0.0, 0.1]
    six = base(6)
    records = series('mocov2', six) + series('mixco', shifted(diffs, six))
    p = sign_p(diffs)
    low, high, level = inverted(diffs, 2 * 0.05)  # the 1 - 2 alpha interval (TOST), m = 1
    assert -0.5 < low and high < 0.5 and p > 0.05
    rows = build_rows(records, policy=StatsPolicy(equivalence_margin=0.5))
    assert verdict(row_of(rows, 'mixco')) == (
        f"{head(MIXCO, diffs)}, {interval_text(diffs, 0.05)}: equivalent within ±0.50 (the "
        f"{100 * level:.3g}% interval [{low:+.2f}, {high:+.2f}] lies inside the margin; sign-flip "
        f"p = {p_text(p)}, Holm p = {p_text(p)}).")
    plain = verdict(row_of(build_rows(records), 'mixco'))
    assert plain.startswith(f"{head(MIXCO, diffs)}, {interval_text(diffs, 0.05)}: undecided "
                            f"with 6 seeds (sign-flip p = {p_text(p)}, Holm p = {p_text(p)})")
    assert 'equivalent' not in plain and 'no difference' not in plain
    narrow = verdict(row_of(build_rows(records, policy=StatsPolicy(equivalence_margin=0.05)),
                            'mixco'))
    assert f"; not shown equivalent within ±0.05 ({100 * level:.3g}% interval " \
           f"[{low:+.2f}, {high:+.2f}])" in narrow


def test_a_smallest_effect_of_interest_gets_its_seeds_planned():
    diffs = [0.4, -0.9, 1.1, 0.2, -0.3, 0.6]
    six = base(6)
    rows = build_rows(series('mocov2', six) + series('mixco', shifted(diffs, six)),
                      policy=StatsPolicy(min_effect=1.0))
    plan = row_of(rows, 'mixco')['compare']['plan']
    need = plan['seeds_for_min_effect']
    assert plan['min_effect'] == 1.0 and plan['df'] == 5
    assert plan['sd'] == pytest.approx(np.std(diffs, ddof=1))
    # more seeds than now, since 6 seeds leave this comparison undecided
    assert isinstance(need, int) and need > 6
    assert (f'{need} paired seeds would find the smallest effect of interest (1.00) with 80% '
            'power') in verdict(row_of(rows, 'mixco'))


def test_verdicts_gives_the_decided_in_table_order_and_counts_the_rest():
    """A sentence for each comparison that reached a verdict, in table order (the paper's rows,
    compared by means only, say nothing); one line counting the rest; filtered by protocol."""
    records = (series('mocov2', BASE) + series('mixco', shifted([1, 2, 3, 2, 1.5, 2.5, 1, 2]))
               + series('mocov2', BASE, protocol='knn')
               + series('mixco', shifted([-3, -2, -4, -3, -2.5, -3.5, -2, -3]), protocol='knn')
               + series('mocov2', BASE, protocol='linear_fast')
               + series('mixco', shifted([0.5, -1, 0, 2, -0.5, 1, -1.5, 0.3]),
                        protocol='linear_fast')
               + series('mocov2', base(2), eval_data='cifar10')
               + series('mixco', shifted([1.0, 2.0], base(2)), eval_data='cifar10'))
    rows = build_rows(records, read_paper(PAPER_RESULTS))
    compared = {(r['protocol'], r['eval_data']): r for r in rows
                if r['source'] == 'this suite' and r['compare']}
    said = verdicts(rows)
    assert said == [verdict(compared['linear_paper', 'tiny-imagenet']),
                    verdict(compared['knn', 'tiny-imagenet']),
                    '2 comparisons undecided or with too few seeds (primary family: 1 undecided; '
                    'exploratory family: 1 too few seeds): see the table.']
    assert ': better than MoCo-v2 (' in said[0] and ': worse than MoCo-v2 (' in said[1]
    assert verdicts(rows, ['knn']) == [said[1]]
    assert verdicts(rows, ['linear_fast']) == [
        '1 comparison undecided or with too few seeds (primary family: 1 undecided): see the '
        'table.']
    assert verdicts(rows, []) == [] and verdicts(rows, ['cluster']) == []
    paper_mixco = next(r for r in rows if r['label'] == f'{MIXCO} (paper)' and r['compare'])
    assert verdict(paper_mixco) is None  # compared by means only, no seeds


def test_the_counted_rest_follows_the_statistics():
    """Primary: three comparisons at 8 seeds, judged by sign-flip p and Holm over the three
    (checked against every sign pattern and a naive Holm loop); the two decided ones get
    sentences, the undecided one and a transfer comparison with 2 seeds are counted."""
    deltas = ([1, 2, 3, 2, 1.5, 2.5, 1, 2], [-3, -2, -4, -3, -2.5, -3.5, -2, -3],
              [0.5, -1, 0, 2, -0.5, 1, -1.5, 0.3])
    records = (series('mocov2', BASE) + series('mixco', shifted(deltas[0]))
               + series('mocov2', BASE, protocol='knn')
               + series('mixco', shifted(deltas[1]), protocol='knn')
               + series('mocov2', BASE, protocol='linear_fast')
               + series('mixco', shifted(deltas[2]), protocol='linear_fast')
               + series('mocov2', base(2), eval_data='cifar10')
               + series('mixco', shifted([1.0, 2.0], base(2)), eval_data='cifar10'))
    rows = build_rows(records)
    holm = naive_holm([sign_p(d) for d in deltas])
    expected = ['better' if adjusted <= 0.05 and np.mean(d) > 0 else
                'worse' if adjusted <= 0.05 else 'undecided' for d, adjusted in zip(deltas, holm)]
    assert expected == ['better', 'worse', 'undecided']
    assert tally(rows) == ('2 comparisons undecided or with too few seeds (primary family: 1 '
                           'undecided; exploratory family: 1 too few seeds): see the table.')
    assert len(verdicts(rows)) == 3
    assert tally(build_rows(series('mocov2', BASE))) is None
    assert tally(build_rows(series('mocov2', BASE) + series('mixco', shifted(deltas[0])))) is None


def test_a_difference_that_rounds_to_zero_is_never_minus_zero():
    from benchmark.reports.tables import format_interval, signed
    assert [signed(x, '.2f') for x in (-1e-15, -0.004, 0.0, -0.006, 1.5)] == [
        '+0.00', '+0.00', '+0.00', '-0.01', '+1.50']
    assert signed(-1e-15, '.2f', '') == '0.00'
    assert format_interval([-0.001, 2.0], '.2f', '+') == '[+0.00, +2.00]'
    assert format_interval([-0.001, 2.0], '.2f') == '[0.00, 2.00]'
