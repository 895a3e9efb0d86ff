"""Aggregates across tasks against rliable's published definitions, written here as naive loops
(the interquartile mean, the probability of improvement, the score distribution), the stratified
bootstrap against a loop over resamples, and the exact Friedman permutation test against brute
force over every permutation; its error rate under no difference by simulation."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from benchmark.reports import aggregate

RNG = np.random.default_rng(3)


def naive_iqm(values):
    """rliable: scipy.stats.trim_mean(scores, 0.25, axis=None): cut int(0.25 n) at each end."""
    ordered = sorted(float(v) for v in np.ravel(values))
    cut = int(0.25 * len(ordered))
    kept = ordered[cut:len(ordered) - cut]
    return sum(kept) / len(kept)


def naive_improvement(mine, theirs):
    """rliable: per task the Mann-Whitney U of X over Y divided by n m, averaged over tasks."""
    per_task = []
    for x, y in zip(mine, theirs):
        total = 0.0
        for a in x.values():
            for b in y.values():
                total += 1.0 if a > b else 0.5 if a == b else 0.0
        per_task.append(total / (len(x) * len(y)))
    return sum(per_task) / len(per_task)


def tasks_of(matrix, seeds=None):
    seeds = seeds or list(range(len(matrix)))
    return [{s: float(matrix[i][t]) for i, s in enumerate(seeds)} for t in range(len(matrix[0]))]


@pytest.mark.parametrize('size', [1, 2, 3, 4, 5, 7, 8, 12, 30])
def test_iqm_is_the_25_percent_trimmed_mean_of_all_values(size):
    values = RNG.normal(size=size)
    assert aggregate.iqm(values) == pytest.approx(naive_iqm(values), abs=1e-12)


def test_iqm_of_a_runs_by_tasks_matrix_pools_every_value():
    scores = RNG.normal(size=(5, 4))
    assert aggregate.iqm(scores) == pytest.approx(naive_iqm(scores), abs=1e-12)
    assert aggregate.iqm(scores) == pytest.approx(stats.trim_mean(scores, 0.25, axis=None))


def test_probability_of_improvement_matches_mann_whitney_per_task():
    mine = tasks_of(np.round(RNG.normal(size=(5, 3)), 1))
    theirs = tasks_of(np.round(RNG.normal(size=(4, 3)), 1))
    assert aggregate.improvement(mine, theirs) == pytest.approx(naive_improvement(mine, theirs))
    per_task = [stats.mannwhitneyu(list(x.values()), list(y.values()),
                                   alternative='greater').statistic / (len(x) * len(y))
                for x, y in zip(mine, theirs)]
    assert aggregate.improvement(mine, theirs) == pytest.approx(np.mean(per_task))
    same = tasks_of([[1.0, 2.0], [3.0, 4.0]])
    assert aggregate.improvement(same, same) == 0.5  # rliable's case of equal scores


def test_profile_is_the_share_of_seeds_above_each_threshold_averaged_over_tasks():
    tasks = [{0: 90.0, 1: 92.0, 2: 95.0}, {0: 80.0, 1: 85.0}]
    taus = [79.0, 80.0, 84.0, 91.0, 95.0, 99.0]
    expected = [np.mean([np.mean([v > tau for v in t.values()]) for t in tasks])
                for tau in taus]
    assert aggregate.profile(tasks, taus) == pytest.approx(expected)
    assert aggregate.profile(tasks, [91.0])[0] == pytest.approx((2 / 3 + 0) / 2)


def test_paired_diffs_use_the_seeds_both_have_and_turn_lower_is_better_around():
    mine, theirs = [{0: 3.0, 1: 5.0, 2: 1.0}], [{0: 1.0, 1: 1.0, 3: 9.0}]
    assert aggregate.paired_diffs(mine, theirs) == [{0: 2.0, 1: 4.0}]
    assert aggregate.paired_diffs(mine, theirs, higher=False) == [{0: -2.0, 1: -4.0}]


def test_tasks_on_the_same_checkpoints_are_resampled_jointly_and_strata_independently():
    base = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}
    tasks = [base, {s: v + 10 for s, v in base.items()},  # one stratum: seeds 0-3
             {5: 7.0, 6: 8.0, 7: 9.0}]                     # another: seeds 5-7
    assert aggregate.strata(tasks) == [((0, 1, 2, 3), [0, 1]), ((5, 6, 7), [2])]
    a, b, c = aggregate.resample(tasks, np.random.default_rng(0), reps=500)
    assert a.shape == (500, 4) and c.shape == (500, 3)
    assert np.array_equal(b, a + 10)  # each resampled seed keeps its tasks together
    assert set(np.unique(c)) == {7.0, 8.0, 9.0}
    assert abs(np.corrcoef(a.mean(axis=1), c.mean(axis=1))[0, 1]) < 0.15


def test_a_task_missing_a_seed_stays_with_the_tasks_of_its_checkpoints():
    """An NA evaluation of one seed must not make its task an independent stratum: that would
    resample two views of the same checkpoints independently and narrow the interval."""
    values = np.random.default_rng(7).normal(0, 1, size=8)  # its own: any test order
    whole = {s: float(v) for s, v in enumerate(values)}
    short = {s: v for s, v in whole.items() if s != 7}
    assert aggregate.strata([whole, short]) == [(tuple(range(8)), [0, 1])]
    a, b = aggregate.resample([whole, short], np.random.default_rng(0), reps=300)
    present = ~np.isnan(b)
    assert np.array_equal(a[present], b[present]) and (~present).any()
    def width(tasks):
        low, high = aggregate.interval(tasks, aggregate.mean_draws, reps=2000)
        return high - low
    # The same values on checkpoints of their own are resampled apart: about 1/sqrt(2) as wide.
    apart = {s + 100: v for s, v in short.items()}
    assert len(aggregate.strata([whole, apart])) == 2
    assert width([whole, short]) > 1.2 * width([whole, apart])
    for statistic in (aggregate.iqm_draws, aggregate.mean_draws):
        low, high = aggregate.interval([whole, short], statistic, reps=300)
        assert low < high and not np.isnan(low)
    assert aggregate.improvement_interval([whole, short], [short, whole], reps=300)[0] < 0.5
    band = aggregate.profile_band([whole, short], [0.0], reps=300)
    assert 0 < band[0][0] <= band[1][0] < 1


def naive_interval(tasks, statistic, alpha, reps, seed):
    """A loop over resamples, drawing in the same order as the vectorised code."""
    rng = np.random.default_rng(seed)
    picks = {}
    for seeds, members in aggregate.strata(tasks):
        picks[seeds] = rng.integers(0, len(seeds), size=(reps, len(seeds)))
    values = []
    for r in range(reps):
        pooled = []
        for seeds, members in aggregate.strata(tasks):
            for index in members:
                pooled += [tasks[index][seeds[i]] for i in picks[seeds][r]]
        values.append(statistic(pooled))
    return tuple(np.quantile(values, [alpha / 2, 1 - alpha / 2]))


def test_the_bootstrap_interval_of_iqm_and_mean_equals_a_loop_over_resamples():
    tasks = tasks_of(np.round(RNG.normal(1, 1, size=(6, 3)), 2)) + [{7: 0.5, 8: 1.5, 9: 2.0}]
    for vectorised, naive in ((aggregate.iqm_draws, naive_iqm), (aggregate.mean_draws, np.mean)):
        got = aggregate.interval(tasks, vectorised, 0.05, reps=300, seed=4)
        assert got == pytest.approx(naive_interval(tasks, naive, 0.05, 300, 4), abs=1e-12)


def test_the_improvement_interval_resamples_each_method_on_its_own():
    mine = tasks_of(RNG.normal(1, 1, size=(6, 2)))
    theirs = tasks_of(RNG.normal(0, 1, size=(6, 2)))
    low, high = aggregate.improvement_interval(mine, theirs, reps=400, seed=1)
    rng = np.random.default_rng(1)
    xs, ys = aggregate.resample(mine, rng, 400), aggregate.resample(theirs, rng, 400)
    draws = [naive_improvement(tasks_of(np.array([x[r] for x in xs]).T),
                               tasks_of(np.array([y[r] for y in ys]).T)) for r in range(400)]
    assert (low, high) == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])), abs=1e-12)
    assert low <= aggregate.improvement(mine, theirs) <= high


def test_the_iqm_interval_covers_a_known_centre_at_about_its_level():
    """Three tasks on shared checkpoints (correlated through the seed), 8 seeds: the 95%
    interval of the mean Δ covers the true mean Δ close to 95% of the time (percentile
    bootstrap at 8 seeds runs a little short)."""
    rng = np.random.default_rng(11)
    covered = 0
    reps = 200
    for _ in range(reps):
        seed_effect = rng.normal(0, 1, size=(8, 1))
        diffs = 0.5 + seed_effect + rng.normal(0, 0.5, size=(8, 3))
        low, high = aggregate.interval(tasks_of(diffs), aggregate.mean_draws, reps=500,
                                       seed=int(rng.integers(1 << 30)))
        covered += low <= 0.5 <= high
    assert covered / reps >= 0.85


# -- Friedman ------------------------------------------------------------------------------------

def brute_force_friedman(values):
    """Every within-block permutation of the ranks (all blocks), naive loops."""
    data = np.asarray(values, float)
    n, k = data.shape
    block_ranks = [list(stats.rankdata(-row)) for row in data]
    observed = sum(sum(r[j] for r in block_ranks) ** 2 for j in range(k))
    reach = total = 0
    for pattern in itertools.product(*[list(itertools.permutations(r)) for r in block_ranks]):
        sums = [sum(p[j] for p in pattern) for j in range(k)]
        total += 1
        reach += sum(s * s for s in sums) >= observed - 1e-9
    return reach / total


@pytest.mark.parametrize('values', [
    [[3.0, 2.0, 1.0], [3.0, 1.0, 2.0], [2.0, 3.0, 1.0]],
    [[1.0, 1.0, 2.0], [5.0, 4.0, 4.0], [0.3, 0.2, 0.1], [7.0, 9.0, 8.0]],   # ties
    [[4.0, 3.0, 2.0, 1.0], [4.0, 3.0, 1.0, 2.0], [4.0, 2.0, 3.0, 1.0]],
])
def test_the_exact_friedman_p_equals_brute_force_and_scipys_statistic(values):
    got = aggregate.friedman(values)
    assert got['exact']
    assert got['p'] == pytest.approx(brute_force_friedman(values), abs=1e-12)
    assert got['statistic'] == pytest.approx(stats.friedmanchisquare(*np.array(values).T)[0])
    ranks = np.mean([stats.rankdata(-np.array(r)) for r in values], axis=0)
    assert got['average_ranks'] == pytest.approx(ranks)


def test_a_method_best_on_every_seed_reaches_the_smallest_p_the_design_allows():
    values = [[3.0, 2.0, 1.0]] * 4  # k = 3, n = 4: of (3!)^4 patterns, the 6 alike are extreme
    got = aggregate.friedman(values)
    assert got["p"] == pytest.approx(1 / 216) and got["smallest_p"] == pytest.approx(1 / 216)
    assert brute_force_friedman(values) == pytest.approx(1 / 216)


def test_the_permutation_cd_approaches_nemenyis_with_many_blocks():
    got = aggregate.friedman(RNG.normal(size=(60, 4)))
    assert not got['exact']
    assert got['cd'] == pytest.approx(aggregate.nemenyi_cd(4, 60), rel=0.12)
    assert aggregate.nemenyi_cd(5, 10) == pytest.approx(2.728 * math.sqrt(30 / 60), rel=1e-3)


def test_friedman_rejects_at_most_alpha_under_no_difference():
    """Shared seed effects (a block effect) and no method effect: the exact test's rejection
    rate at 0.05 stays within Monte Carlo error of at most 0.05."""
    rng = np.random.default_rng(5)
    reps, rejected, pairs = 300, 0, 0
    for _ in range(reps):
        values = rng.normal(0, 1, size=(5, 1)) + rng.normal(0, 0.3, size=(5, 3))
        got = aggregate.friedman(values)
        rejected += got['p'] <= 0.05
        ranks = got['average_ranks']
        pairs += (ranks.max() - ranks.min()) > got['cd']
    se = math.sqrt(0.05 * 0.95 / reps)
    assert rejected / reps <= 0.05 + 2 * se
    assert pairs / reps <= 0.05 + 2 * se  # the CD's familywise error
