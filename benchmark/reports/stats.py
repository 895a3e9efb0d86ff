"""Statistics over seeds: intervals, paired tests, probability of improvement, Holm, power.

Pure functions of plain sequences of floats; every one is checked against scipy or a naive loop
in ``tests/reports/test_stats.py``. Their method names (what a table's legend says) are in
`METHODS_LEGEND`.

- `mean_interval`: mean, sample std, n and the 95% Student-t interval of the mean.
- `paired_comparison`: over the seeds both sides have, the mean paired difference with its
  Student-t interval, the paired t-test p-value, the Wilcoxon signed-rank p-value (n >= 6),
  the probability of improvement with a bootstrap interval, and, where fewer than 3 seeds are
  paired, the number of seeds that would detect the observed difference at 80% power.
- `holm`: Holm's step-down adjustment of the p-values of one table's comparisons.
"""
from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.8
MIN_TEST_SEEDS = 3     # fewer paired seeds: no p-value, the seeds needed instead
MIN_WILCOXON_SEEDS = 6  # below this the signed-rank test cannot reach p < 0.05 (two-sided)
BOOTSTRAP_SAMPLES = 2000
MAX_SEEDS = 1000       # `seeds_for_power` gives up above this ("more than 1000")

METHODS_LEGEND = (
    'Intervals: 95% Student-t confidence interval of the mean over seeds. '
    'Paired comparisons, over the seeds both rows have: mean difference with its 95% '
    'Student-t interval; p: paired t-test (two-sided); p_W: Wilcoxon signed-rank test '
    '(two-sided, exact, n >= 6); P(better): probability of improvement, the share of '
    '(method seed, baseline seed) pairs in which the method scores better (ties count half), '
    'with a 95% percentile bootstrap interval over seeds; p_Holm: the paired t-test p-values '
    "of one table adjusted by Holm's step-down method. With fewer than 3 paired seeds no test "
    'is made; the table gives the number of seeds a paired t-test would need to detect the '
    'observed difference with 80% power at alpha = 0.05, from the observed paired spread.')


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Optional[tuple]:
    """(low, high) of the Student-t interval of the mean; None for fewer than 2 values."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * x.std(ddof=1) / math.sqrt(n)
    return float(x.mean() - half), float(x.mean() + half)


def mean_interval(values: Sequence[float]) -> Dict[str, Optional[float]]:
    """{'mean', 'std', 'n', 'ci'}: mean, sample std (None for one value) and the t interval."""
    x = np.asarray(values, dtype=np.float64)
    return dict(mean=float(x.mean()) if x.size else None,
                std=float(x.std(ddof=1)) if x.size > 1 else None, n=int(x.size),
                ci=t_interval(x))


def probability_of_improvement(mine: Sequence[float], theirs: Sequence[float],
                               higher_is_better: bool = True) -> float:
    """P(a run of mine scores better than a run of theirs): the share of all (i, j) pairs in
    which mine[i] beats theirs[j], ties counting one half (the Mann-Whitney U statistic / nm)."""
    a, b = np.asarray(mine, np.float64), np.asarray(theirs, np.float64)
    if not higher_is_better:
        a, b = -a, -b
    wins = (a[:, None] > b[None, :]).sum() + 0.5 * (a[:, None] == b[None, :]).sum()
    return float(wins / (a.size * b.size))


def bootstrap_improvement(mine: Sequence[float], theirs: Sequence[float],
                          higher_is_better: bool = True, samples: int = BOOTSTRAP_SAMPLES,
                          seed: int = 0) -> tuple:
    """95% percentile interval of `probability_of_improvement`, resampling the paired seeds
    (each bootstrap sample draws seed indices with replacement and keeps both sides of a seed)."""
    a, b = np.asarray(mine, np.float64), np.asarray(theirs, np.float64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, a.size, size=(samples, a.size))
    sign = 1.0 if higher_is_better else -1.0
    x, y = sign * a[picks], sign * b[picks]                          # (samples, n) each
    wins = (x[:, :, None] > y[:, None, :]).mean(axis=(1, 2)) \
        + 0.5 * (x[:, :, None] == y[:, None, :]).mean(axis=(1, 2))
    low, high = np.percentile(wins, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return float(low), float(high)


def paired_power(delta: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test with n pairs to detect a mean difference `delta`
    when the differences have standard deviation `sd` (noncentral t)."""
    if n < 2:
        return 0.0
    if sd <= 0:
        return 1.0 if delta != 0 else alpha
    df, nc = n - 1, delta / (sd / math.sqrt(n))
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def seeds_for_power(delta: float, sd: Optional[float], power: float = POWER,
                    alpha: float = ALPHA) -> Optional[int]:
    """The fewest paired seeds (>= 2) whose two-sided paired t-test detects `delta` with
    `power`, given the paired spread `sd`; None when it cannot be said (no spread or a zero
    spread, no difference) or more than `MAX_SEEDS` would be needed."""
    if sd is None or not math.isfinite(sd) or delta == 0 or not math.isfinite(delta):
        return None
    if sd == 0:  # identical differences (few seeds, a coarse metric): nothing to plan from
        return None
    for n in range(2, MAX_SEEDS + 1):
        if paired_power(delta, sd, n, alpha) >= power:
            return n
    return None


def paired_comparison(mine: Mapping[int, float], theirs: Mapping[int, float],
                      higher_is_better: bool = True) -> Optional[Dict[str, object]]:
    """Compare two rows seed by seed over the seeds both have; None if they share none.

    Returns:
        dict with ``n``, ``seeds``, ``delta`` (mean of mine - theirs), ``std`` (of the
        differences, None for one seed), ``ci`` (t interval of the mean difference, None for
        one seed), ``p_t`` (paired t-test; None under `MIN_TEST_SEEDS`), ``p_wilcoxon`` (None
        under `MIN_WILCOXON_SEEDS`), ``p_improve`` and ``p_improve_ci``, and ``seeds_needed``
        (fewer than `MIN_TEST_SEEDS` seeds: the seeds needed for 80% power, else None).
    """
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None
    a = np.array([mine[s] for s in seeds], np.float64)
    b = np.array([theirs[s] for s in seeds], np.float64)
    diff = a - b
    n = len(seeds)
    std = float(diff.std(ddof=1)) if n > 1 else None
    out: Dict[str, object] = dict(
        n=n, seeds=seeds, delta=float(diff.mean()), std=std, ci=t_interval(diff),
        p_t=None, p_wilcoxon=None, seeds_needed=None,
        p_improve=probability_of_improvement(a, b, higher_is_better),
        p_improve_ci=bootstrap_improvement(a, b, higher_is_better) if n > 1 else None)
    if n < MIN_TEST_SEEDS:
        out['seeds_needed'] = seeds_for_power(float(diff.mean()), std)
        return out
    if np.all(diff == diff[0]):  # no spread: the t statistic is undefined
        out['p_t'] = 1.0 if diff[0] == 0 else 0.0
    else:
        out['p_t'] = float(stats.ttest_rel(a, b).pvalue)
    if n >= MIN_WILCOXON_SEEDS:
        out['p_wilcoxon'] = (1.0 if np.all(diff == 0) else
                             float(stats.wilcoxon(a, b, zero_method='wilcox').pvalue))
    return out


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
