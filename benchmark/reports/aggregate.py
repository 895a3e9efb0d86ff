"""Aggregates across tasks in the manner of rliable (Agarwal et al. 2021, "Deep reinforcement
learning at the edge of the statistical precipice"), for seeds paired by construction.

A *task* is one evaluation (evaluation data x protocol and its settings) of a suite's runs; a
method's runs are its seeds, and every task of a section evaluates the same checkpoints, so the
tasks of one seed are not independent. Pure functions of plain numbers; each is checked against a
naive loop in ``tests/reports/test_aggregate.py``.

- `iqm`: rliable's interquartile mean, the 25%-trimmed mean of all (task, seed) values pooled
  (``scipy.stats.trim_mean(x, 0.25)``, rliable's ``aggregate_iqm``).
- `improvement`: rliable's probability of improvement, P(X > Y) + P(X = Y) / 2 over all pairs
  of X's and Y's seeds of a task (unpaired, Mann-Whitney's U / (n m)), averaged over tasks.
- `profile`: rliable's performance profile (score distribution): at each threshold tau the
  fraction of a task's seeds scoring above tau, averaged over tasks.
- `resample`: the stratified bootstrap. rliable resamples the runs of each task independently;
  here the tasks that evaluate the same checkpoints (that share a seed) form one stratum whose
  seeds are resampled *jointly*, keeping each seed's tasks together; a task without a value
  for a drawn seed (an NA evaluation) leaves that draw out. Percentile intervals.
- `friedman`: the Friedman test over blocks, exact by enumerating every within-block
  permutation of the methods' ranks (Monte Carlo above `EXACT_MAX_PATTERNS`), with the
  critical difference of average ranks from the same permutation distribution (the largest
  difference of average ranks, a max-T version of Nemenyi's test). A block is an independent
  unit: one seed, whose tasks all share that seed's checkpoints.
"""
from __future__ import annotations

import itertools
import math
import warnings
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

TRIM = 0.25
REPS = 2000            # bootstrap resamples (fixed seed: the same records give the same table)
BOOT_SEED = 0
EXACT_MAX_PATTERNS = 200_000  # Friedman permutations enumerated up to here; sampled above
MC_PERMUTATIONS = 20_000
Tasks = Sequence[Mapping[int, float]]  # per task: seed -> value


def iqm(values: Sequence[float]) -> float:
    """The interquartile mean of all values (rliable's ``aggregate_iqm``)."""
    return float(stats.trim_mean(np.asarray(values, dtype=float).ravel(), TRIM))


def improvement(mine: Tasks, theirs: Tasks) -> float:
    """rliable's probability of improvement of `mine` over `theirs`, averaged over tasks."""
    return float(np.mean([_pairs(np.array(list(x.values()), float),
                                 np.array(list(y.values()), float))
                          for x, y in zip(mine, theirs)]))


def profile(tasks: Tasks, taus: Sequence[float]) -> np.ndarray:
    """The fraction of each task's seeds scoring above each tau, averaged over tasks."""
    taus = np.asarray(taus, dtype=float)
    return np.mean([(np.array(list(t.values()), float)[:, None] > taus).mean(axis=0)
                    for t in tasks], axis=0)


def paired_diffs(mine: Tasks, theirs: Tasks, higher: bool = True) -> List[Dict[int, float]]:
    """Per task, the seed-by-seed difference (better positive) over the seeds both have."""
    sign = 1.0 if higher else -1.0
    return [{s: sign * (x[s] - y[s]) for s in sorted(set(x) & set(y))}
            for x, y in zip(mine, theirs)]


# -- the stratified bootstrap --------------------------------------------------------------------

def strata(tasks: Tasks) -> List[Tuple[Tuple[int, ...], List[int]]]:
    """(seeds, task indices) of the groups of tasks that share checkpoints: tasks that have a
    seed in common are in one stratum (transitively), its seeds the union of theirs. A task
    missing a seed (an NA evaluation) stays in its stratum."""
    groups: List[Tuple[set, List[int]]] = []
    for index, task in enumerate(tasks):
        seeds, members = set(task), [index]
        for other in [g for g in groups if g[0] & seeds]:
            groups.remove(other)
            seeds |= other[0]
            members = other[1] + members
        groups.append((seeds, members))
    return sorted((tuple(sorted(seeds)), sorted(members)) for seeds, members in groups)


def resample(tasks: Tasks, rng: np.random.Generator, reps: int = REPS) -> List[np.ndarray]:
    """`reps` stratified bootstrap samples of every task: per task an array (reps, the seeds of
    its stratum), NaN where a drawn seed has no value in that task. Within a stratum one draw of
    seeds (with replacement) serves all its tasks."""
    out: List[Optional[np.ndarray]] = [None] * len(tasks)
    for seeds, members in strata(tasks):
        picks = rng.integers(0, len(seeds), size=(reps, len(seeds)))
        for index in members:
            values = np.array([tasks[index].get(s, np.nan) for s in seeds], dtype=float)
            out[index] = values[picks]
    return out  # type: ignore[return-value]


def percentile(draws: np.ndarray, alpha: float) -> Tuple[float, float]:
    """The percentile interval of bootstrap draws (along axis 0), NaN draws left out."""
    low, high = np.nanquantile(draws, [alpha / 2, 1 - alpha / 2], axis=0)
    return low, high


def interval(tasks: Tasks, statistic: Callable[[np.ndarray], np.ndarray], alpha: float = 0.05,
             reps: int = REPS, seed: int = BOOT_SEED) -> Tuple[float, float]:
    """The stratified-bootstrap percentile interval of `statistic` of the pooled values
    (`statistic` maps an array (reps, values), NaN for a missing value, to (reps,))."""
    rng = np.random.default_rng(seed)
    draws = statistic(np.concatenate(resample(tasks, rng, reps), axis=1))
    low, high = percentile(draws, alpha)
    return float(low), float(high)


def iqm_draws(pooled: np.ndarray) -> np.ndarray:
    if not np.isnan(pooled).any():
        return stats.trim_mean(pooled, TRIM, axis=1)
    return np.array([stats.trim_mean(row[~np.isnan(row)], TRIM) if (~np.isnan(row)).any()
                     else np.nan for row in pooled])


def mean_draws(pooled: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():  # a resample without any value: NaN, left out
        warnings.simplefilter('ignore', RuntimeWarning)
        return np.nanmean(pooled, axis=1)


def _pairs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + P(X = Y) / 2 over all pairs along the last axis of x and y where both values
    are present (NaN: no value)."""
    valid = ~np.isnan(x)[..., :, None] & ~np.isnan(y)[..., None, :]
    gt = ((x[..., :, None] > y[..., None, :]) & valid).sum(axis=(-2, -1))
    eq = ((x[..., :, None] == y[..., None, :]) & valid).sum(axis=(-2, -1))
    count = valid.sum(axis=(-2, -1))
    with np.errstate(invalid='ignore', divide='ignore'):
        return (gt + 0.5 * eq) / count


def improvement_interval(mine: Tasks, theirs: Tasks, alpha: float = 0.05, reps: int = REPS,
                         seed: int = BOOT_SEED) -> Tuple[float, float]:
    """The interval of `improvement`: each method's seeds resampled on their own (jointly across
    the tasks that share them), as rliable resamples X and Y independently."""
    rng = np.random.default_rng(seed)
    xs, ys = resample(mine, rng, reps), resample(theirs, rng, reps)
    draws = np.nanmean([_pairs(x, y) for x, y in zip(xs, ys)], axis=0)
    low, high = percentile(draws, alpha)
    return float(low), float(high)


def profile_band(tasks: Tasks, taus: Sequence[float], alpha: float = 0.05, reps: int = REPS,
                 seed: int = BOOT_SEED) -> Tuple[np.ndarray, np.ndarray]:
    """The pointwise stratified-bootstrap band of `profile` at each tau."""
    rng = np.random.default_rng(seed)
    taus = np.asarray(taus, dtype=float)
    shares = []
    for sample in resample(tasks, rng, reps):
        present = (~np.isnan(sample)).sum(axis=1)[:, None]
        with np.errstate(invalid='ignore', divide='ignore'):
            shares.append((sample[:, :, None] > taus).sum(axis=1) / present)
    return percentile(np.nanmean(shares, axis=0), alpha)


# -- Friedman over blocks, exact -----------------------------------------------------------------

def ranks(values: np.ndarray, higher: bool = True) -> np.ndarray:
    """Ranks within each block (row), 1 = best, ties averaged."""
    return stats.rankdata(-values if higher else values, axis=1)


def _patterns(block_ranks: np.ndarray, rng: np.random.Generator) -> Tuple[np.ndarray, bool]:
    """Rank sums per method over every within-block permutation of the ranks (the first block
    held fixed, which changes no statistic's distribution), or over MC_PERMUTATIONS random ones;
    and whether they were enumerated."""
    n, k = block_ranks.shape
    if math.factorial(k) ** (n - 1) <= EXACT_MAX_PATTERNS:
        totals = block_ranks[:1]
        for row in block_ranks[1:]:
            perms = np.array(list(itertools.permutations(row)))
            totals = (totals[:, None, :] + perms[None, :, :]).reshape(-1, k)
        return totals, True
    order = rng.permuted(np.broadcast_to(np.arange(k), (MC_PERMUTATIONS, n, k)), axis=2)
    shuffled = np.take_along_axis(np.broadcast_to(block_ranks, order.shape), order, axis=2)
    return shuffled.sum(axis=1), False


def friedman(values: Sequence[Sequence[float]], higher: bool = True,
             alpha: float = 0.05) -> Dict[str, object]:
    """The Friedman test of k methods over n blocks (``values[block][method]``), its p-value
    by permutation within blocks, the average ranks and the critical difference.

    Returns dict(statistic (scipy's chi-square, ties corrected), p, exact, average_ranks, cd,
    smallest_p, blocks (n), k): p counts the permutations whose sum of squared rank sums reaches the observed
    one (the chi-square is a monotone function of it within a block's ties); cd is the
    1 - alpha quantile of the largest difference of average ranks under permutation, so two
    methods whose average ranks differ by more than cd differ with familywise error <= alpha.
    """
    data = np.asarray(values, dtype=float)
    n, k = data.shape
    block_ranks = ranks(data, higher)
    totals, exact = _patterns(block_ranks, np.random.default_rng(BOOT_SEED))
    observed = block_ranks.sum(axis=0)
    score = (totals ** 2).sum(axis=1)
    reach = score >= (observed ** 2).sum() - 1e-9
    p = float(reach.mean()) if exact else float((reach.sum() + 1) / (len(score) + 1))
    spread = (totals.max(axis=1) - totals.min(axis=1)) / n
    cd = float(np.quantile(spread, 1 - alpha, method='higher'))
    top = float(np.isclose(score, score.max()).mean())
    tied = bool((block_ranks == block_ranks[:, :1]).all())  # scipy's chi-square is NaN then
    chi2 = (float(stats.friedmanchisquare(*data.T).statistic) if k >= 3 and n >= 2
            and not tied else None)
    return dict(statistic=chi2, p=p, exact=exact, average_ranks=observed / n, cd=cd,
                smallest_p=top if exact else 1 / (len(score) + 1), blocks=n, k=k)


def nemenyi_cd(k: int, n: int, alpha: float = 0.05) -> float:
    """Nemenyi's critical difference (Demsar 2006): q_alpha sqrt(k (k + 1) / (6 n)), with
    q_alpha the studentized range's quantile over sqrt(2); the asymptotic reference of
    `friedman`'s permutation cd."""
    q = stats.studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2)
    return float(q * math.sqrt(k * (k + 1) / (6 * n)))
