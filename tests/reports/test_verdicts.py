"""The generated verdicts: each branch of `verdict` (one seed; two seeds and the seeds needed;
three or more, better / worse after Holm, or no difference shown) against numbers computed here
with scipy and naive loops; `verdicts` in table order and filtered by protocol."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from benchmark.layout import PAPER_RESULTS
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.records import build_record
from benchmark.reports.render import read_paper
from benchmark.reports.verdicts import tally, verdict, verdicts

BASE = {0: 40.0, 1: 41.0, 2: 39.5, 3: 40.2}


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


def shifted(diffs, base=BASE):
    return {s: base[s] + d for s, d in zip(sorted(base), diffs)}


def row_of(rows, method, protocol='linear_paper'):
    return next(r for r in rows if r['method'] == method and r['protocol'] == protocol
                and r['source'] == 'this suite')


# Independent references

def p_text(p):
    return '< 0.0001' if p < 1e-4 else f'{p:.2g}'


def t_ci(diffs):
    d = np.asarray(diffs, np.float64)
    half = sps.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
    return d.mean() - half, d.mean() + half


def seeds_needed(diffs):
    d = np.asarray(diffs, np.float64)
    delta, sd = d.mean(), d.std(ddof=1)
    for n in range(2, 1001):
        crit, nc = sps.t.ppf(0.975, n - 1), delta / (sd / math.sqrt(n))
        if sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc) >= 0.8:
            return n
    return None


def improvement(a, b, higher=True):
    wins = 0.0
    for x, y in itertools.product(a, b):
        better = x > y if higher else x < y
        wins += 1.0 if better else 0.5 if x == y else 0.0
    return wins / (len(a) * len(b))


def bootstrap(a, b, higher=True):
    """The 95% percentile interval over 2000 resamplings of the seeds (generator seed 0)."""
    picks = np.random.default_rng(0).integers(0, len(a), size=(2000, len(a)))
    values = [improvement([a[i] for i in row], [b[i] for i in row], higher) for row in picks]
    return tuple(np.percentile(values, [2.5, 97.5]))


def naive_holm(pvalues):
    m, ranked = len(pvalues), sorted(pvalues)
    return [max(min(1.0, (m - j) * ranked[j]) for j in range(ranked.index(p) + 1))
            for p in pvalues]


def head(label, diffs, protocol='linear (paper protocol)', unit='top-1 points', fmt='.2f'):
    delta = float(np.mean(diffs))
    text = f'{label} vs mocov2, {protocol} on tiny-imagenet: Δ {delta:+{fmt}} {unit}'
    if len(diffs) > 1:
        low, high = t_ci(diffs)
        text += f', 95% CI [{low:+{fmt}}, {high:+{fmt}}]'
    return text + f', n = {len(diffs)}'


# The branches

def test_one_paired_seed():
    rows = build_rows(series('mocov2', {0: 40.0}) + series('mixco', {0: 42.5}))
    assert verdict(row_of(rows, 'mixco')) == (
        f"{head('mixco', [2.5])}: one paired seed, no interval and no test; run more seeds.")
    assert verdict(row_of(rows, 'mocov2')) is None  # a baseline has no comparison


def test_two_paired_seeds_say_how_many_would_detect_the_difference():
    diffs = [2.0, 3.5]
    rows = build_rows(series('mocov2', {0: 40.0, 1: 41.0})
                      + series('mixco', {0: 42.0, 1: 44.5}))
    needed = seeds_needed(diffs)
    assert needed > 2
    assert verdict(row_of(rows, 'mixco')) == (
        f"{head('mixco', diffs)}: too few seeds to conclude; about {needed} seeds would detect "
        'a Δ this size with 80% power.')


@pytest.mark.parametrize('mixco, ending', [
    ({0: 41.0, 1: 40.0}, 'a Δ of zero gives no estimate of the seeds needed'),
    ({0: 41.0, 1: 40.1}, 'more than 1000 seeds would be needed to detect a Δ this size')])
def test_two_paired_seeds_without_a_number_of_seeds_say_why(mixco, ending):
    diffs = [1.0, -0.9] if mixco[1] == 40.1 else [1.0, -1.0]
    assert seeds_needed(diffs) is None
    rows = build_rows(series('mocov2', {0: 40.0, 1: 41.0}) + series('mixco', mixco))
    assert verdict(row_of(rows, 'mixco')) == (
        f"{head('mixco', diffs)}: too few seeds to conclude; {ending}.")


@pytest.mark.parametrize('sign, side', [(1, 'better'), (-1, 'worse')])
def test_significant_after_holm_is_better_or_worse(sign, side):
    strong = [sign * d for d in (3.0, 3.4, 2.8, 3.3)]
    weak = [0.4, -0.9, 1.1, 0.2]
    rows = build_rows(series('mocov2', BASE) + series('mixco', shifted(strong))
                      + series('imix', shifted(weak)))
    a = [BASE[s] + d for s, d in zip(sorted(BASE), strong)]
    b = [BASE[s] for s in sorted(BASE)]
    p_strong = sps.ttest_rel(a, b).pvalue
    p_weak = sps.ttest_rel([BASE[s] + d for s, d in zip(sorted(BASE), weak)], b).pvalue
    holm_strong, holm_weak = naive_holm([p_strong, p_weak])
    assert holm_strong < 0.05 <= holm_weak and holm_strong != p_strong
    low, high = bootstrap(a, b)
    assert verdict(row_of(rows, 'mixco')) == (
        f"{head('mixco', strong)}: {side} than mocov2 (paired t-test p = {p_text(p_strong)}, "
        f"Holm p = {p_text(holm_strong)}; P(better) = {improvement(a, b):.2f} "
        f"[{low:.2f}, {high:.2f}]).")
    needed = seeds_needed(weak)
    assert needed > 4
    assert verdict(row_of(rows, 'imix')).replace('imix vs', 'X vs') == (
        f"{head('X', weak)}: no difference shown at alpha = 0.05 (paired t-test p = "
        f"{p_text(p_weak)}, Holm p = {p_text(holm_weak)}); about {needed} seeds would detect a "
        'Δ this size with 80% power.')


def test_a_lower_davies_bouldin_is_better():
    base = {0: 2.0, 1: 2.1, 2: 1.95}
    diffs = [-0.30, -0.35, -0.28]
    rows = build_rows(series('mocov2', base, protocol='cluster')
                      + series('mixco', shifted(diffs, base), protocol='cluster'))
    a = [base[s] + d for s, d in zip(sorted(base), diffs)]
    b = [base[s] for s in sorted(base)]
    p = sps.ttest_rel(a, b).pvalue
    low, high = bootstrap(a, b, higher=False)
    assert improvement(a, b, higher=False) == 1.0
    assert verdict(row_of(rows, 'mixco', 'cluster')) == (
        f"{head('mixco', diffs, 'cluster indices', 'Davies-Bouldin', '.3f')}: better than mocov2 "
        f"(paired t-test p = {p_text(p)}, Holm p = {p_text(p)}; P(better) = 1.00 "
        f"[{low:.2f}, {high:.2f}]).")


def test_holm_can_take_a_nominal_difference_back():
    """p < 0.05 alone, but not once the table's other tests are counted; the seeds run already
    would detect a Δ this size, so no seeds sentence follows."""
    diffs, others = [1.0, 2.5, 3.5, 2.0], ([1.0, -0.5, 0.2, 0.3], [0.3, -0.4, 0.5, -0.1])
    rows = build_rows(series('mocov2', BASE) + series('mixco', shifted(diffs))
                      + series('imix', shifted(others[0])) + series('unmix', shifted(others[1])))
    b = [BASE[s] for s in sorted(BASE)]
    p = [sps.ttest_rel([x + d for x, d in zip(b, ds)], b).pvalue for ds in (diffs,) + others]
    adjusted = naive_holm(p)[0]
    assert p[0] < 0.05 <= adjusted and seeds_needed(diffs) == len(diffs)
    assert verdict(row_of(rows, 'mixco')) == (
        f"{head('mixco', diffs)}: no difference shown at alpha = 0.05 (paired t-test p = "
        f"{p_text(p[0])}, Holm p = {p_text(adjusted)}).")


def test_verdicts_lists_compared_rows_in_table_order_and_filters_by_protocol():
    records = (series('mocov2', BASE) + series('mixco', shifted([1, 2, 3, 2]))
               + series('mocov2', BASE, protocol='knn')
               + series('mixco', shifted([0.5, 1, 0, 2]), protocol='knn')
               + series('mocov2', BASE, protocol='cluster')
               + series('mixco', shifted([-0.1, 0, -0.2, 0.1]), protocol='cluster'))
    rows = build_rows(records, read_paper(PAPER_RESULTS))
    compared = [r for r in rows if r['source'] == 'this suite' and r['compare']]
    assert [r['protocol'] for r in compared] == ['linear_paper', 'knn', 'cluster']
    head, *everything = verdicts(rows)
    assert head == tally(rows)
    assert everything == [verdict(r) for r in compared]  # the paper's rows say nothing
    assert all(s.startswith('mixco vs mocov2, ') for s in everything)
    assert verdicts(rows, ['knn'])[1:] == [verdict(compared[1])]
    assert ' kNN on tiny-imagenet' in verdicts(rows, ['knn'])[1]
    assert verdicts(rows, ['knn', 'cluster'])[1:] == [verdict(r) for r in compared[1:]]
    assert verdicts(rows, []) == [] and verdicts(rows, ['linear_fast']) == []
    paper_mixco = next(r for r in rows if r['label'] == 'mixco (paper)' and r['compare'])
    assert verdict(paper_mixco) is None  # compared by means only, no seeds


def test_tally_counts_outcomes_as_the_statistics_say():
    """better / worse / not shown by Holm-adjusted paired t-tests, too few seeds under 3; the
    counts checked against scipy's tests and a naive Holm loop."""
    from scipy import stats as sps

    records = (series('mocov2', BASE) + series('mixco', shifted([1, 2, 3, 2]))
               + series('mocov2', BASE, protocol='knn')
               + series('mixco', shifted([-3, -2, -4, -3]), protocol='knn')
               + series('mocov2', BASE, protocol='linear_fast')
               + series('mixco', shifted([0.5, -1, 0, 2]), protocol='linear_fast'))
    rows = build_rows(records)
    ps = []
    for delta in ([1, 2, 3, 2], [-3, -2, -4, -3], [0.5, -1, 0, 2]):
        base = [BASE[s] for s in sorted(BASE)]
        ps.append(sps.ttest_rel([b + d for b, d in zip(base, delta)], base).pvalue)
    order = sorted(range(3), key=lambda i: ps[i])
    holm, running = [0.0] * 3, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * ps[i]))
        holm[i] = running
    expected = ['better' if holm[0] < 0.05 else 'not shown',
                'worse' if holm[1] < 0.05 else 'not shown',
                'better' if holm[2] < 0.05 else 'not shown']
    text = tally(rows)
    assert text.startswith('Of 3 paired comparisons with the baseline')
    assert f"{expected.count('better')} better" in text
    assert f"{expected.count('worse')} worse" in text
    assert f"{expected.count('not shown')} without a difference shown" in text
    assert tally(build_rows(series('mocov2', BASE))) is None
    few = build_rows(series('mocov2', {0: 1.0, 1: 2.0}) + series('mixco', {0: 2.0, 1: 2.5}))
    assert '1 with too few seeds to test' in tally(few)
