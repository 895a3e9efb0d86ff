"""Statistics over seeds: exact sign-flip tests and intervals, wins with an exact interval,
Holm within a family, and planning (minimal detectable effect, seeds for an effect).

Pure functions of plain sequences of floats; each is checked against a brute-force loop, scipy
or a simulation in ``tests/reports/test_stats.py`` and ``tests/reports/test_calibration.py``.
What a table's legend says about them is `METHODS_LEGEND`.

Seeds are paired by construction (same initialisation, data order and augmentation per seed),
so a comparison works on the per-seed differences d_1..d_n. Its test is Fisher's sign-flip
(permutation) test of the mean difference: under no difference each d_i is as likely to be
-d_i, so all 2^n sign patterns are equally likely. It is exact for any n and never gives a
p-value below ``2 / 2^n`` (0.25 at 3 seeds). Its inversion is the interval of the centre of the
differences: the set of shifts delta the test does not reject. With the means of the 2^n - 1
non-empty subsets of d sorted, the equal-tailed interval at level 1 - a is
``[m_(k+1), m_(N-k)]`` with ``k = floor(2^n a / 2) - 1``; at k = 0 it is the range of the
differences, at level ``1 - 2 / 2^n`` (93.75% at 5 seeds), and below that no interval at that
level exists. The same construction on one row's values gives the interval of its mean. Every
such interval lies between the smallest and the largest value, so it never leaves the range of
a bounded metric. Up to `EXACT_MAX_N` values every subset is enumerated; above, `MC_SUBSETS`
random subsets (a fixed seed) stand in for them.
"""
from __future__ import annotations

import functools
import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.8
MIN_SEEDS = 5          # paired seeds a verdict needs by default (a suite's `min_seeds`)
EXACT_MAX_N = 16       # subsets enumerated up to here (65,535); sampled above
MC_SUBSETS = 1 << 16
ROUND = 8              # decimals values are rounded to before a comparison: float round-off
                       # (1e-14) is no evidence, a metric's resolution (>= 1e-4) is kept
POWER_DRAWS = 4000     # simulated experiments per power value (fixed seed, common numbers)
POWER_EXACT_MAX_N = 12  # sign-flip power simulated up to here; the paired t-test's above
MAX_PLAN_SEEDS = 1000

METHODS_LEGEND = (
    'Intervals of a row (mean over seeds) and of Δ (the mean paired difference with the '
    'baseline, seed by seed) are exact sign-flip intervals: the values whose shift the sign-flip '
    'test does not reject, assuming only that seeds scatter symmetrically. They lie within the '
    'seeds\' values, so never outside a metric\'s range. A 95% interval needs 6 seeds; at 5 the '
    'widest exact one is the range of the values (93.8%); the level is printed where it is not '
    'the nominal one. Under the suite\'s minimum of paired seeds (min_seeds) a row shows the '
    'range of its seeds, and no verdict, P(better) or test is given. Test: the exact sign-flip '
    '(permutation) test of the mean paired difference over all 2^n sign patterns, two-sided; '
    'its smallest possible p is 2/2^n. p_Holm: Holm\'s step-down adjustment within the '
    'comparison\'s family (primary or exploratory); Δ intervals are at the level at which Holm '
    'judged the comparison, so an interval excludes 0 exactly when the verdict is better or '
    'worse; where the seeds cannot reach that level (5 seeds at 0.05) the differences are shown '
    'seed by seed instead. Equivalent: the 1 - 2α/m sign-flip interval lies within ± the declared margin. '
    'P(better): the share of paired seeds the method wins (ties half), with an exact '
    'Clopper-Pearson interval (wins for the lower end, wins and ties for the upper). MDE: the '
    'smallest true Δ the test would detect with 80% power at the current seeds and the '
    "family's level, from the paired SD pooled over the family's comparisons of that protocol.")


# -- sign-flip machinery ----------------------------------------------------------------------

@functools.lru_cache(maxsize=32)
def _subsets(n: int) -> np.ndarray:
    """0/1 matrix (rows: every non-empty subset of n items, or `MC_SUBSETS` random ones)."""
    if n <= EXACT_MAX_N:
        masks = np.arange(1, 1 << n, dtype=np.int64)
        return ((masks[:, None] >> np.arange(n)) & 1).astype(np.float64)
    rows = np.random.default_rng(20261125).integers(0, 2, size=(MC_SUBSETS, n))
    return rows[rows.sum(1) > 0].astype(np.float64)


def _clean(values: Sequence[float]) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def centre(values: Sequence[float]) -> float:
    """The mean of `values`, kept within their range: the floating-point mean of equal values
    can land a unit in the last place outside them (seven times 0.4 averages to 0.39999...),
    and every interval here is drawn around the mean it is printed with."""
    x = _clean(values)
    return float(min(max(x.mean(), x.min()), x.max()))


def sample_sd(values: Sequence[float]) -> Optional[float]:
    """The sample SD (ddof=1) of `values`; 0 where they are equal up to float round-off (at
    `ROUND` decimals), not the 1e-17 the arithmetic leaves; None under two values."""
    x = _clean(values)
    if x.size < 2:
        return None
    rounded = np.round(x, ROUND)
    return 0.0 if rounded.min() == rounded.max() else float(x.std(ddof=1))


def subset_means(values: Sequence[float]) -> np.ndarray:
    """Sorted means of the non-empty subsets of `values` (sampled above `EXACT_MAX_N`)."""
    x = _clean(values)
    bits = _subsets(x.size)
    return np.sort(np.round(bits @ x / bits.sum(1), ROUND))  # round-off ties are ties


def _pattern_count(n: int) -> int:
    """How many equally likely sign patterns (subsets) the p-values count over."""
    return 1 << n if n <= EXACT_MAX_N else _subsets(n).shape[0] + 1


def signflip_p(diffs: Sequence[float], shift: float = 0.0) -> Dict[str, float]:
    """One- and two-sided p-values of the sign-flip test of 'the differences centre on
    `shift`': ``greater`` (alternative: above it), ``less`` and ``two_sided`` (twice the
    smaller, at most 1, so that it agrees exactly with `signflip_interval`)."""
    d = _clean(diffs)
    if d.size == 0:
        raise ValueError('signflip_p: no differences')
    means = subset_means(d)
    total = _pattern_count(d.size)
    shift = round(float(shift), ROUND)
    greater = (1 + np.count_nonzero(means <= shift)) / total
    less = (1 + np.count_nonzero(means >= shift)) / total
    return dict(greater=float(greater), less=float(less),
                two_sided=float(min(1.0, 2 * min(greater, less))))


def smallest_p(n: int) -> float:
    """The smallest two-sided sign-flip p-value n paired seeds can give: 2 / 2^n."""
    return 2.0 / (1 << n) if n <= EXACT_MAX_N else 2.0 / (MC_SUBSETS + 1)


def seeds_for_level(alpha: float, sides: int = 2) -> int:
    """The fewest seeds whose sign-flip test can reach p <= alpha (two- or one-sided)."""
    n = 1
    while (sides / float(1 << n)) > alpha:
        n += 1
    return n


def signflip_interval(values: Sequence[float], alpha: float = ALPHA
                      ) -> Optional[Tuple[float, float, float]]:
    """(low, high, level) of the equal-tailed sign-flip interval of the centre of `values` at
    level 1 - alpha; where n is too small for that level, the widest exact interval there is
    (the range, at level 1 - 2/2^n). None for fewer than 2 values."""
    x = _clean(values)
    n = x.size
    if n < 2:
        return None
    means = subset_means(x)
    total = _pattern_count(n)
    k = max(0, math.floor(total * alpha / 2) - 1)
    level = 1.0 - 2.0 * (k + 1) / total
    # The interval holds the mean (at least half of the subset means lie on either side of it)
    # and lies within the values; the subset means' rounding to `ROUND` decimals must not move
    # an end past either, as it does where every value is the same.
    mid, lowest, highest = centre(x), float(x.min()), float(x.max())
    return (min(max(float(means[k]), lowest), mid),
            max(min(float(means[means.size - 1 - k]), highest), mid), level)


def mean_interval(values: Sequence[float], alpha: float = ALPHA) -> Dict[str, object]:
    """{'mean', 'std', 'n', 'ci', 'ci_level', 'range'} of one row's values over seeds."""
    x = np.asarray(values, dtype=np.float64)
    interval = signflip_interval(x, alpha)
    return dict(mean=centre(x) if x.size else None, std=sample_sd(x), n=int(x.size),
                ci=interval[:2] if interval else None,
                ci_level=interval[2] if interval else None,
                range=(float(x.min()), float(x.max())) if x.size else None)


# -- wins -----------------------------------------------------------------------------------------

def clopper_pearson(successes: int, n: int, alpha: float = ALPHA) -> Tuple[float, float]:
    """The exact (Clopper-Pearson) equal-tailed interval of a binomial proportion."""
    low = 0.0 if successes == 0 else stats.beta.ppf(alpha / 2, successes, n - successes + 1)
    high = 1.0 if successes == n else stats.beta.ppf(1 - alpha / 2, successes + 1, n - successes)
    return float(low), float(high)


def wins(diffs: Sequence[float], alpha: float = ALPHA) -> Dict[str, object]:
    """P(better) as the share of paired seeds won: {'wins', 'ties', 'losses', 'share' (ties
    half), 'ci'}. The interval covers P(win) + P(tie)/2: its lower end is the exact lower bound
    of P(win), its upper end the exact upper bound of P(win or tie), each at alpha / 2."""
    d = np.round(_clean(diffs), ROUND)
    n, w, t = d.size, int(np.count_nonzero(d > 0)), int(np.count_nonzero(d == 0))
    low = clopper_pearson(w, n, alpha)[0]
    high = clopper_pearson(w + t, n, alpha)[1]
    return dict(wins=w, ties=t, losses=n - w - t, share=(w + t / 2) / n, ci=(low, high))


# -- multiplicity ---------------------------------------------------------------------------------

def holm(pvalues: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm's step-down adjusted p-values (None stays None and does not count as a test)."""
    known = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    m = len(known)
    out: List[Optional[float]] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(known)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def holm_levels(pvalues: Sequence[Optional[float]], alpha: float = ALPHA) -> List[Optional[float]]:
    """The level at which Holm's procedure judged each test: alpha / (m - k) at the step k
    (from 0) where it was rejected; for those not rejected, the level of the step where the
    procedure stopped. An interval at that level excludes the null value exactly when the test
    is rejected, and is never narrower than one at level alpha."""
    known = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(known)
    out: List[Optional[float]] = [None] * len(pvalues)
    for rank, (p, i) in enumerate(known):
        level = alpha / (m - rank)
        if p > level:  # stops here: this and every later one are judged at this level
            for _, j in known[rank:]:
                out[j] = level
            break
        out[i] = level
    return out


# -- planning -------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _power_draws(n: int) -> np.ndarray:
    return np.random.default_rng(1000 + n).standard_normal((POWER_DRAWS, n))


def _t_power(n: int, effect: float, alpha: float) -> float:
    """Power of the two-sided paired t-test to detect a standardised effect (one side)."""
    df, nc = n - 1, effect * math.sqrt(n)
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(np.nan_to_num(stats.nct.sf(crit, df, nc)))  # sf: no NaN at large nc


def signflip_power(n: int, effect: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided sign-flip test at level alpha to find a standardised mean
    difference `effect` (Δ / SD of the differences, normal differences) with the right sign.

    Up to `POWER_EXACT_MAX_N` seeds: simulated through the exact test (`POWER_DRAWS` draws,
    fixed seed, the same draws for every effect, so the power rises with the effect); above,
    the paired t-test's power (noncentral t), which the sign-flip test approaches."""
    if n < 2 or smallest_p(n) > alpha:
        return 0.0
    if n > POWER_EXACT_MAX_N:
        return _t_power(n, effect, alpha)
    k = math.floor((1 << n) * alpha / 2) - 1
    bits = _subsets(n)
    sums = bits @ (_power_draws(n) + effect).T  # (subsets, draws); continuous: no ties
    return float(np.mean(np.count_nonzero(sums <= 0, axis=0) <= k))


@functools.lru_cache(maxsize=None)
def _standard_mde(n: int, alpha: float, power: float) -> float:
    """The standardised effect (Δ / SD) the sign-flip test finds with `power` at n seeds."""
    low, high = 0.0, 1.0
    while signflip_power(n, high, alpha) < power:
        high *= 2
        if high > 1e6:
            return math.inf
    while high - low > 1e-4 * high:
        mid = (low + high) / 2
        low, high = (mid, high) if signflip_power(n, mid, alpha) < power else (low, mid)
    return high


def minimal_detectable_effect(n: int, sd: Optional[float], alpha: float = ALPHA,
                              power: float = POWER) -> Optional[float]:
    """The smallest true Δ (in the metric's units) the sign-flip test at level alpha finds
    with `power` at n paired seeds, given the SD of the differences; inf where n seeds cannot
    reach alpha; None without an SD."""
    if sd is None or not math.isfinite(sd) or sd <= 0:
        return None
    if n < 2 or smallest_p(n) > alpha:
        return math.inf
    return _standard_mde(n, alpha, power) * sd


def seeds_for_effect(effect: float, sd: Optional[float], alpha: float = ALPHA,
                     power: float = POWER) -> Optional[int]:
    """The fewest paired seeds whose sign-flip test at level alpha finds a true Δ of `effect`
    with `power`, given the SD of the differences; None when it cannot be said (no SD, no
    effect) or above `MAX_PLAN_SEEDS`."""
    if sd is None or not math.isfinite(sd) or sd <= 0 or not effect:
        return None
    standard = abs(effect) / sd
    for n in range(seeds_for_level(alpha), MAX_PLAN_SEEDS + 1):
        if signflip_power(n, standard, alpha) >= power:
            return n
    return None


def pooled_sd(parts: Sequence[Tuple[Optional[float], int]]) -> Tuple[Optional[float], int]:
    """(pooled SD, degrees of freedom) of several samples' (SD, n): sqrt(sum (n-1) s^2 / df)."""
    usable = [(s, n) for s, n in parts if s is not None and n > 1]
    df = sum(n - 1 for _, n in usable)
    if not df:
        return None, 0
    return math.sqrt(sum((n - 1) * s * s for s, n in usable) / df), df


# -- one paired comparison ------------------------------------------------------------------------

def paired_comparison(mine: Mapping[int, float], theirs: Mapping[int, float],
                      higher_is_better: bool = True, min_seeds: int = MIN_SEEDS,
                      alpha: float = ALPHA) -> Optional[Dict[str, object]]:
    """Compare two rows seed by seed over the seeds both have; None if they share none.

    Returns:
        dict with ``n``, ``seeds``, ``diffs`` (mine - theirs per shared seed), ``delta``
        (their mean), ``std`` (None for one seed), ``range`` (of the differences), ``enough``
        (n >= min_seeds), and where enough: ``p`` (two-sided sign-flip), ``p_floor`` (2/2^n),
        ``ci`` / ``ci_level`` (the interval at level 1 - alpha, or the widest there is; the
        family's adjustment replaces it), ``wins`` (see `wins`; for lower-is-better metrics a
        win is a lower value).
    """
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None
    diff = np.array([mine[s] - theirs[s] for s in seeds], np.float64)
    n = len(seeds)
    out: Dict[str, object] = dict(
        n=n, seeds=seeds, diffs=[float(v) for v in diff], delta=centre(diff), std=sample_sd(diff),
        range=(float(diff.min()), float(diff.max())), enough=n >= min_seeds, min_seeds=min_seeds,
        p=None, p_floor=None, ci=None, ci_level=None, wins=None)
    if n < min_seeds or n < 2:
        return out
    interval = signflip_interval(diff, alpha)
    out.update(p=signflip_p(diff)['two_sided'], p_floor=smallest_p(n), ci=interval[:2],
               ci_level=interval[2], wins=wins(diff if higher_is_better else -diff, alpha))
    return out
