"""The statistics over seeds against brute force (every sign pattern, every shift), scipy and
closed forms: sign-flip p-values and intervals, Clopper-Pearson, Holm and its levels, power."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from benchmark.reports import stats

STEP = 100 / 360  # one digits test image, in top-1 points


def brute_p(d, shift=0.0):
    """Two-sided sign-flip p over every sign pattern (twice the smaller tail)."""
    d = np.round(np.asarray(d, float) - shift, 10)
    total = np.sum(d)
    flips = [np.dot(s, d) for s in itertools.product((1, -1), repeat=len(d))]
    greater = np.mean([f >= total - 1e-9 for f in flips])
    less = np.mean([f <= total + 1e-9 for f in flips])
    return min(1.0, 2 * min(greater, less))


@pytest.mark.parametrize('seed', range(6))
def test_signflip_p_is_the_brute_force_enumeration(seed):
    rng = np.random.default_rng(seed)
    n = 3 + seed
    d = np.round(rng.normal(0.5, 1.0, n) / STEP) * STEP
    assert stats.signflip_p(d)['two_sided'] == pytest.approx(brute_p(d), abs=1e-12)
    assert stats.signflip_p(d, 0.3)['two_sided'] == pytest.approx(brute_p(d, 0.3), abs=1e-12)


@pytest.mark.parametrize('n', [3, 5, 8])
def test_equal_differences_never_go_below_what_the_seeds_allow(n):
    """Bit-equal or round-off-equal differences: p = 2/2^n, not 1e-28 or 0."""
    assert stats.signflip_p([STEP] * n)['two_sided'] == 2 / 2 ** n == stats.smallest_p(n)
    near = [93.0555555555 - 92.7777777777 + 1e-13 * i for i in range(n)]
    assert stats.signflip_p(near)['two_sided'] == 2 / 2 ** n
    assert stats.signflip_p([0.0] * n)['two_sided'] == 1.0


@pytest.mark.parametrize('seed', range(5))
def test_signflip_interval_is_the_inverted_test(seed):
    """Every shift inside the interval is not rejected at alpha, every shift outside is."""
    rng = np.random.default_rng(10 + seed)
    n = 6 + seed % 3
    d = np.round(rng.normal(1.0, 2.0, n) / STEP) * STEP
    low, high, level = stats.signflip_interval(d, 0.05)
    assert level >= 0.95 and low <= d.mean() <= high
    for shift in np.linspace(d.min() - 1, d.max() + 1, 301):
        inside = low - 1e-9 <= shift <= high + 1e-9
        if abs(shift - low) > 1e-6 and abs(shift - high) > 1e-6:
            assert (brute_p(d, shift) > 0.05) == inside, shift


def test_intervals_stay_inside_the_metric_and_give_their_level():
    near_top = [99.72, 100.0, 100.0, 99.44, 100.0]
    low, high, level = stats.signflip_interval(near_top)
    assert 99.44 <= low <= high <= 100.0
    assert level == pytest.approx(1 - 2 / 32)  # at 5 seeds: the range, 93.75%
    assert stats.signflip_interval([1, 2, 3, 4, 5, 6])[2] == pytest.approx(1 - 2 / 64)
    two = stats.mean_interval([79.73, 104.44 - 12])
    assert two['range'] == (79.73, 92.44) and two['ci'][1] <= 92.44
    assert stats.signflip_interval([3.0]) is None


def test_clopper_pearson_is_scipys_exact_interval():
    for n in (3, 5, 10):
        for k in range(n + 1):
            ci = sps.binomtest(k, n).proportion_ci(0.95, method='exact')
            assert stats.clopper_pearson(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_wins_count_ties_half_and_the_interval_brackets_them():
    share = stats.wins([1.0, 1.0, 0.0, -1.0, 1.0])
    assert (share['wins'], share['ties'], share['losses']) == (3, 1, 1)
    assert share['share'] == pytest.approx(3.5 / 5)
    assert share['ci'] == pytest.approx((stats.clopper_pearson(3, 5)[0],
                                         stats.clopper_pearson(4, 5)[1]))
    every = stats.wins([1.0] * 5)
    assert every['share'] == 1.0 and every['ci'][0] < 1.0 == every['ci'][1]


@pytest.mark.parametrize('seed', range(5))
def test_holm_matches_a_naive_step_down_and_its_levels_agree_with_it(seed):
    rng = np.random.default_rng(seed)
    p = list(rng.uniform(0, 0.08, 6)) + [None]
    adjusted = stats.holm(p)
    order = sorted(range(6), key=lambda i: p[i])
    naive, running = {}, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (6 - rank) * p[i]))
        naive[i] = running
    assert adjusted[:6] == pytest.approx([naive[i] for i in range(6)]) and adjusted[6] is None
    levels = stats.holm_levels(p, 0.05)
    for i in range(6):
        assert (p[i] <= levels[i]) == (adjusted[i] <= 0.05)
        assert levels[i] <= 0.05


def test_seeds_for_a_level():
    assert stats.seeds_for_level(0.05) == 6 and stats.seeds_for_level(0.025) == 7
    assert stats.seeds_for_level(0.05, sides=1) == 5


def test_power_at_six_seeds_is_all_six_differences_of_one_sign():
    """At 6 seeds and alpha 0.05 the test rejects only when every difference is positive:
    the power is Phi(effect)^6 exactly; the simulation is within its Monte Carlo error."""
    for effect in (0.5, 1.0, 2.0):
        exact = sps.norm.cdf(effect) ** 6
        se = math.sqrt(exact * (1 - exact) / stats.POWER_DRAWS)
        assert abs(stats.signflip_power(6, effect) - exact) < 4 * se + 1e-9
    assert stats.signflip_power(5, 10.0) == 0.0  # 5 seeds cannot reach 0.05


def test_power_against_the_real_test_on_fresh_draws_and_the_t_test_above():
    rng = np.random.default_rng(99)
    draws = rng.standard_normal((600, 9)) + 0.9
    found = np.mean([stats.signflip_p(d)['greater'] <= 0.025 for d in draws])
    assert abs(stats.signflip_power(9, 0.9) - found) < 0.06
    assert abs(stats.signflip_power(12, 0.8) - stats.signflip_power(13, 0.8)) < 0.06
    assert stats.signflip_power(40, 60.0) == 1.0  # no NaN in the noncentral-t tail


def test_mde_and_seeds_for_an_effect_are_the_inverse_of_the_power():
    mde = stats.minimal_detectable_effect(10, 2.0)
    assert stats.signflip_power(10, mde / 2.0) >= 0.8 > stats.signflip_power(10, mde / 2.0 * 0.98)
    n = stats.seeds_for_effect(1.0, 1.0)
    assert stats.signflip_power(n, 1.0) >= 0.8 > stats.signflip_power(n - 1, 1.0)
    assert stats.minimal_detectable_effect(5, 1.0) == math.inf
    assert stats.minimal_detectable_effect(8, 0.0) is None and stats.seeds_for_effect(1, None) is None
    assert stats.seeds_for_effect(0.001, 1.0) is None  # more than MAX_PLAN_SEEDS


def test_pooled_sd():
    sd, df = stats.pooled_sd([(1.0, 3), (2.0, 5), (None, 4), (3.0, 1)])
    assert df == 6 and sd == pytest.approx(math.sqrt((2 * 1 + 4 * 4) / 6))


def test_paired_comparison_withholds_everything_under_min_seeds():
    few = stats.paired_comparison({0: 90.0, 1: 91.0}, {0: 89.0, 1: 89.5, 2: 88.0})
    assert few['n'] == 2 and few['diffs'] == [1.0, 1.5] and few['range'] == (1.0, 1.5)
    assert few['p'] is None and few['ci'] is None and few['wins'] is None and not few['enough']
    mine = {s: 90.0 + s for s in range(6)}
    theirs = {s: 89.0 + s for s in range(6)}
    full = stats.paired_comparison(mine, theirs)
    assert full['p'] == full['p_floor'] == 2 / 64 and full['ci'] == (1.0, 1.0)
    lower = stats.paired_comparison(mine, theirs, higher_is_better=False)
    assert lower['wins']['wins'] == 0


@pytest.mark.parametrize('value', [STEP, 0.4, -2 * STEP, 0.0, 91 * STEP / 0.25])
@pytest.mark.parametrize('n', [2, 5, 6, 7, 18])
def test_equal_values_give_their_value_as_mean_interval_and_range(value, n):
    """Seven times 0.4 averages to 0.39999999999999997 in floats, and the subset means round to
    0.4: the mean, the interval and the range must still hold one another (a plot draws the
    bar from the mean to each end), and the SD is 0, not the 6e-17 the arithmetic leaves."""
    row = stats.mean_interval([value] * n)
    low, high = row['ci']
    assert row['range'][0] <= low <= row['mean'] <= high <= row['range'][1]
    assert row['mean'] == pytest.approx(value) and row['std'] == 0.0
    for alpha in (0.05, 0.0125):
        low, high, _ = stats.signflip_interval([value] * n, alpha)
        assert low <= stats.centre([value] * n) <= high
    paired = stats.paired_comparison({s: 90.0 + (s % 3) * STEP + value for s in range(n)},
                                     {s: 90.0 + (s % 3) * STEP for s in range(n)})
    assert paired['std'] == 0.0 and paired['range'][0] <= paired['delta'] <= paired['range'][1]
    if paired['ci']:
        assert paired['ci'][0] <= paired['delta'] <= paired['ci'][1]
