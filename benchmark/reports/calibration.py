"""Calibration of the leaderboard's statistics by simulation, through the real path: records
drawn from known distributions -> ``build_rows`` (rows, comparisons, families, Holm, intervals)
-> verdicts. ``tools/calibrate_stats.py`` prints the table (and puts it into
results/reference/studies.md); ``tests/reports/test_calibration.py`` checks the error rates and
coverage.

The model mimics the digits records: top-1 on a fixed test set of `TEST_IMAGES` images (so
every accuracy is a multiple of 100/360 points), a seed effect shared by every method of that
seed (same initialisation, data order and augmentations: the pairing), and each method's own
noise per seed. A suite has a baseline (MoCo-v2) and three methods compared with it on the
primary protocol (`linear_fast`): one family of three comparisons.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from benchmark.reports.comparisons import StatsPolicy
from benchmark.reports.leaderboard import build_rows

TEST_IMAGES = 360
BASELINE = 'mocov2'
METHODS = ('mixco', 'imix', 'unmix')
PROTOCOL = 'linear_fast'


@dataclass(frozen=True)
class Model:
    """True mean of the baseline, SD of the shared seed effect and of each method's own noise
    (top-1 points), and each method's true shift in the latent accuracy."""

    mean: float = 92.0
    seed_sd: float = 1.5
    noise_sd: float = 1.0
    shifts: Sequence[float] = (0.0, 0.0, 0.0)


def _accuracy(latent: np.ndarray) -> np.ndarray:
    """What a test set of TEST_IMAGES reports: the share of images right, in percent."""
    return np.clip(np.round(latent * TEST_IMAGES / 100), 0, TEST_IMAGES) * 100 / TEST_IMAGES


def draw(model: Model, n: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """{method: n accuracies}, seed by seed."""
    seed_effect = rng.normal(0, model.seed_sd, n)
    out = {BASELINE: _accuracy(model.mean + seed_effect + rng.normal(0, model.noise_sd, n))}
    for method, shift in zip(METHODS, model.shifts):
        out[method] = _accuracy(model.mean + shift + seed_effect
                                + rng.normal(0, model.noise_sd, n))
    return out


def truth(model: Model, draws: int = 400_000, seed: int = 7) -> Dict[str, float]:
    """The true expected accuracy of each method (of the rounded metric), by a large draw."""
    values = draw(model, draws, np.random.default_rng(seed))
    return {method: float(v.mean()) for method, v in values.items()}


def records(values: Dict[str, np.ndarray]) -> List[dict]:
    """Minimal records the leaderboard reads, one per method and seed."""
    out = []
    for method, per_seed in values.items():
        for seed, value in enumerate(per_seed):
            out.append(dict(
                id=f'sim-{method}-{seed}', created=f'2026-01-01T00:00:{seed:02d}', method=method,
                backbone='resnet18', pretrain_data='digits', pretrain_epochs=30,
                eval_data='digits', seed=seed, world_size=1, total_batch=64,
                time_s_per_epoch=None, peak_memory_gb=None, config=f'{method}_r18_digits.py',
                setting_sha256=f'setting-{method}', overrides={}, status='ok', extra={},
                protocols={PROTOCOL: dict(settings=dict(epochs=100), metrics=dict(
                    top1=float(value)))}))
    return out


def simulate(model: Model, n: int, reps: int, policy: Optional[StatsPolicy] = None,
             seed: int = 0) -> Dict[str, float]:
    """Push `reps` simulated suites of n seeds through ``build_rows``; return the rates:
    ``false`` (a family with any wrong better/worse verdict: better where the true Δ <= 0, or
    worse where it is >= 0), ``better`` (share of comparisons called better), ``equivalent``,
    ``delta_coverage`` / ``mean_coverage`` (intervals that hold the true Δ / mean, over the
    comparisons and rows with at least min_seeds seeds; NaN below), and their counts."""
    policy = policy or StatsPolicy()
    rng = np.random.default_rng(seed)
    true = truth(model)
    false = better = equivalent = compared = 0
    covered = [0, 0]
    mean_covered = [0, 0]
    for _ in range(reps):
        rows = [r for r in build_rows(records(draw(model, n, rng)), policy=policy)
                if r['protocol'] == PROTOCOL]
        wrong = False
        for row in rows:
            stat = row['metrics']['top1']
            if stat['n'] >= policy.min_seeds and stat['ci']:
                mean_covered[0] += stat['ci'][0] - 1e-9 <= true[row['method']] <= stat['ci'][1] + 1e-9
                mean_covered[1] += 1
            compare = row['compare']
            if not compare:
                continue
            compared += 1
            delta = true[row['method']] - true[BASELINE]
            verdict = compare['verdict']
            wrong |= (verdict == 'better' and delta <= 0) or (verdict == 'worse' and delta >= 0)
            better += verdict == 'better'
            equivalent += verdict == 'equivalent'
            paired = compare['paired']
            if paired['ci'] is not None:
                covered[0] += paired['ci'][0] - 1e-9 <= delta <= paired['ci'][1] + 1e-9
                covered[1] += 1
        false += wrong
    return dict(false=false / reps, better=better / compared, equivalent=equivalent / compared,
                delta_coverage=covered[0] / covered[1] if covered[1] else math.nan,
                mean_coverage=mean_covered[0] / mean_covered[1] if mean_covered[1] else math.nan,
                reps=reps, comparisons=compared, intervals=covered[1])


def monte_carlo_se(rate: float, count: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-12) / max(count, 1))


def calibration_table(reps: int = 400, seeds: Sequence[int] = (3, 5, 10)) -> str:
    """The Markdown table of ``tools/calibrate_stats.py``: per n, the family's false-verdict
    rate under no difference, interval coverage, equivalence at the margin, power at Δ = 2."""
    margin = 1.0
    lines = ['| paired seeds | false better/worse per family, no difference (α = 0.05) | '
             'Δ interval coverage | mean interval coverage | "equivalent" at true Δ = ±margin '
             f'(margin {margin:g}, α = 0.05) | "better" at true Δ = +2 |',
             '|---|---|---|---|---|---|']
    null, edge, effect = Model(), Model(shifts=(margin, -margin, margin)), Model(shifts=(2, 2, 2))
    for n in seeds:
        a = simulate(null, n, reps, seed=n)
        e = simulate(edge, n, reps, StatsPolicy(equivalence_margin=margin), seed=100 + n)
        b = simulate(effect, n, reps, seed=200 + n)

        def rate(value: float, count: int) -> str:
            if math.isnan(value):
                return 'no interval (under min_seeds)'
            return f'{value:.3f} ± {monte_carlo_se(value, count):.3f}'
        lines.append(f"| {n} | {rate(a['false'], reps)} | {rate(a['delta_coverage'], a['intervals'])}"
                     f" | {rate(a['mean_coverage'], 4 * reps)} | "
                     f"{rate(e['equivalent'], e['comparisons'])} | "
                     f"{rate(b['better'], b['comparisons'])} |")
    model = Model()
    lines += ['', f'Model: top-1 on {TEST_IMAGES} test images (steps of {100 / TEST_IMAGES:.2f} '
              f'points), baseline mean {model.mean:g}, a seed effect shared by the methods of a '
              f'seed (SD {model.seed_sd:g}) and each method\'s own noise (SD '
              f'{model.noise_sd:g}); one primary family of 3 comparisons with the baseline; '
              f'{reps} simulated suites per cell, ± one Monte Carlo standard error; min_seeds = '
              f'{StatsPolicy().min_seeds}. Generated by `tools/calibrate_stats.py`.']
    return '\n'.join(lines) + '\n'
