"""Every statistic of benchmark.reports.stats against scipy or a naive loop, on fixed and random
data."""
import itertools
import math
import statistics

import numpy as np
import pytest
from scipy import stats as sps

from benchmark.reports.stats import (METHODS_LEGEND, bootstrap_improvement, holm, mean_interval,
                                     paired_comparison, paired_power, probability_of_improvement,
                                     seeds_for_power, t_interval)


def test_t_interval_matches_scipy_and_a_hand_computation():
    values = [93.06, 92.50, 93.62]
    low, high = t_interval(values)
    ref = sps.t.interval(0.95, 2, loc=np.mean(values), scale=sps.sem(values))
    assert (low, high) == pytest.approx(ref, abs=1e-12)
    half = 4.3026527297 * statistics.stdev(values) / math.sqrt(3)  # t(0.975, 2), from a table
    assert high - statistics.fmean(values) == pytest.approx(half, rel=1e-9)
    assert t_interval([1.0]) is None
    out = mean_interval([1.0])
    assert out == dict(mean=1.0, std=None, n=1, ci=None)


@pytest.mark.parametrize('seed', range(5))
def test_mean_interval_on_random_data(seed):
    x = np.random.default_rng(seed).normal(50, 3, size=2 + seed)
    out = mean_interval(x)
    assert out['mean'] == pytest.approx(statistics.fmean(x)) and out['n'] == x.size
    assert out['std'] == pytest.approx(statistics.stdev(x))
    assert out['ci'] == pytest.approx(sps.t.interval(0.95, x.size - 1, loc=x.mean(),
                                                     scale=sps.sem(x)))


def naive_improvement(a, b):
    total = 0.0
    for x, y in itertools.product(a, b):
        total += 1.0 if x > y else 0.5 if x == y else 0.0
    return total / (len(a) * len(b))


@pytest.mark.parametrize('seed', range(6))
def test_probability_of_improvement_is_mann_whitney_u_over_nm(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, size=3 + seed).astype(float)  # small integers: ties happen
    b = rng.integers(0, 6, size=3 + seed).astype(float)
    p = probability_of_improvement(a, b)
    assert p == pytest.approx(naive_improvement(a, b), abs=1e-12)
    u = sps.mannwhitneyu(a, b, alternative='two-sided').statistic
    assert p == pytest.approx(u / (a.size * b.size), abs=1e-12)
    assert probability_of_improvement(a, b, higher_is_better=False) == pytest.approx(
        naive_improvement(-a, -b), abs=1e-12)


def test_bootstrap_interval_matches_a_naive_resampling_loop():
    a, b = [1.0, 3.0, 2.0, 5.0], [2.0, 1.0, 2.0, 4.0]
    low, high = bootstrap_improvement(a, b, samples=300, seed=7)
    rng = np.random.default_rng(7)
    picks = rng.integers(0, 4, size=(300, 4))
    values = [naive_improvement([a[i] for i in row], [b[i] for i in row]) for row in picks]
    assert (low, high) == pytest.approx(tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12)
    assert low <= probability_of_improvement(a, b) <= high


@pytest.mark.parametrize('n', [3, 4, 6, 9])
def test_paired_comparison_matches_scipy(n):
    rng = np.random.default_rng(n)
    mine = {s: float(v) for s, v in enumerate(rng.normal(90, 1.5, n))}
    theirs = {s: float(v) for s, v in enumerate(rng.normal(89, 1.5, n))}
    theirs[100] = 50.0  # a seed only one side has is left out
    out = paired_comparison(mine, theirs)
    a, b = np.array(list(mine.values())), np.array([theirs[s] for s in mine])
    assert out['n'] == n and out['seeds'] == list(range(n))
    assert out['delta'] == pytest.approx(statistics.fmean(a - b), abs=1e-12)
    assert out['std'] == pytest.approx(statistics.stdev(a - b), abs=1e-12)
    assert out['ci'] == pytest.approx(sps.t.interval(0.95, n - 1, loc=(a - b).mean(),
                                                     scale=sps.sem(a - b)), abs=1e-12)
    assert out['p_t'] == pytest.approx(sps.ttest_rel(a, b).pvalue, abs=1e-12)
    assert out['p_t'] == pytest.approx(sps.ttest_1samp(a - b, 0).pvalue, abs=1e-12)
    if n >= 6:
        assert out['p_wilcoxon'] == pytest.approx(sps.wilcoxon(a, b).pvalue, abs=1e-12)
    else:
        assert out['p_wilcoxon'] is None
    assert out['seeds_needed'] is None
    assert out['p_improve'] == pytest.approx(naive_improvement(a, b))


def test_fewer_than_three_seeds_give_the_seeds_needed_instead_of_a_p_value():
    out = paired_comparison({0: 87.78, 1: 88.0}, {0: 92.92, 1: 93.5})
    assert out['p_t'] is None and out['p_wilcoxon'] is None and out['n'] == 2
    diffs = [87.78 - 92.92, 88.0 - 93.5]
    assert out['seeds_needed'] == seeds_for_power(statistics.fmean(diffs), statistics.stdev(diffs))
    needed = out['seeds_needed']  # the smallest n whose power reaches 80%, by a plain loop
    assert needed == next(n for n in range(2, 100) if paired_power(
        statistics.fmean(diffs), statistics.stdev(diffs), n) >= 0.8)
    one = paired_comparison({0: 1.0}, {0: 2.0})
    assert one['std'] is None and one['ci'] is None and one['seeds_needed'] is None
    assert paired_comparison({0: 1.0}, {1: 2.0}) is None


def test_paired_power_matches_a_monte_carlo_simulation():
    rng = np.random.default_rng(0)
    delta, sd, n, trials = 0.8, 1.0, 8, 20000
    diffs = rng.normal(delta, sd, size=(trials, n))
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(n))
    simulated = np.mean(np.abs(t) > sps.t.ppf(0.975, n - 1))
    assert paired_power(delta, sd, n) == pytest.approx(simulated, abs=0.01)


def test_seeds_for_power_agrees_with_the_textbook_value_and_is_the_smallest():
    # Effect size 1 (delta = sd): a two-sided paired t-test at alpha .05 needs 10 pairs for
    # 80% power (power 0.803 at 10, 0.750 at 9).
    assert seeds_for_power(1.0, 1.0) == 10
    assert paired_power(1.0, 1.0, 9) < 0.8 <= paired_power(1.0, 1.0, 10)
    assert seeds_for_power(-5.14, 1.77) == seeds_for_power(5.14, 1.77)
    n = seeds_for_power(0.5, 1.0)
    assert paired_power(0.5, 1.0, n - 1) < 0.8 <= paired_power(0.5, 1.0, n)
    assert seeds_for_power(0.0, 1.0) is None and seeds_for_power(1.0, None) is None
    assert seeds_for_power(1e-6, 1.0) is None  # more than the cap


def naive_holm(p):
    order = sorted(range(len(p)), key=lambda i: p[i])
    m, adjusted, running = len(p), [0.0] * len(p), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        adjusted[i] = running
    return adjusted


@pytest.mark.parametrize('seed', range(5))
def test_holm_matches_a_naive_step_down_and_skips_missing(seed):
    p = list(np.random.default_rng(seed).uniform(0, 0.2, size=4 + seed))
    assert holm(p) == pytest.approx(naive_holm(p), abs=1e-15)
    with_none = p[:2] + [None] + p[2:]
    out = holm(with_none)
    assert out[2] is None and [v for v in out if v is not None] == pytest.approx(naive_holm(p))
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_legend_names_every_method():
    for word in ('Student-t', 'paired t-test', 'Wilcoxon signed-rank', 'bootstrap', 'Holm',
                 '80% power'):
        assert word in METHODS_LEGEND


def test_a_zero_paired_spread_plans_nothing():
    """Two seeds that differ by exactly the same amount (a coarse metric) give no estimate of
    the seeds needed, not a claim that 2 suffice."""
    assert seeds_for_power(2.22, 0.0) is None
