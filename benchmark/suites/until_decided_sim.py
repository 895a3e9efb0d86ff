"""`until_decided` by simulation: the real loop (design, looks, records -> rows -> comparisons ->
decisions, the state file) with stand-in training that draws records from a known model, like
the digits records (top-1 on 360 test images, a seed effect shared by the methods of a seed,
each method's own noise, kNN and the fast linear probe from the same checkpoint).

`simulate` gives the family's false-verdict rate over all looks, the share called better, and
the seeds it took; `fixed_power` the power of a fixed design of n seeds judged once at alpha.
``tools/calibrate_stats.py`` prints both as a table (results/reference/studies.md); the tests
check the error rate.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Set

import numpy as np

from benchmark.reports import sequential
from benchmark.reports.comparisons import StatsPolicy
from benchmark.suites.until_decided import until_decided

TEST_IMAGES = 360
BASELINE, METHOD = 'mocov2', 'mixco'
PROTOCOLS = ('knn', 'linear_fast')


@dataclass(frozen=True)
class Model:
    """Top-1 points: the baseline's mean, the SD of the seed effect shared by the methods of a
    seed, of a run's own effect shared by its protocols, of each protocol's own noise, and the
    method's true shift (on every protocol)."""

    mean: float = 92.0
    seed_sd: float = 1.5
    run_sd: float = 0.8
    protocol_sd: float = 0.6
    shift: float = 0.0


def _accuracy(latent: float) -> float:
    return float(np.clip(np.round(latent * TEST_IMAGES / 100), 0, TEST_IMAGES)
                 * 100 / TEST_IMAGES)


class StandIn:
    """Records drawn on demand, as if each (method, seed) run had trained and been evaluated."""

    def __init__(self, model: Model, rng: np.random.Generator) -> None:
        self.model, self.rng = model, rng
        self.records: List[dict] = []
        self.effects: Dict[int, float] = {}
        self.trained: Set[tuple] = set()

    def __call__(self) -> List[dict]:
        return list(self.records)

    def train(self, methods: Set[str], seeds: Sequence[int]) -> bool:
        for method in sorted(methods):
            for seed in seeds:
                if (method, seed) in self.trained:
                    continue
                self.trained.add((method, seed))
                effect = self.effects.setdefault(seed, self.rng.normal(0, self.model.seed_sd))
                run = (self.model.mean + effect + self.rng.normal(0, self.model.run_sd)
                       + (self.model.shift if method == METHOD else 0.0))
                self.records.append(_record(method, seed, {
                    p: _accuracy(run + self.rng.normal(0, self.model.protocol_sd))
                    for p in PROTOCOLS}))
        return True


def _record(method: str, seed: int, top1: Dict[str, float]) -> dict:
    return dict(
        id=f'sim-{method}-{seed}', created=f'2026-01-01T00:00:{seed % 60:02d}', method=method,
        backbone='resnet18', pretrain_data='digits', pretrain_epochs=30, eval_data='digits',
        seed=seed, world_size=1, total_batch=64, time_s_per_epoch=None, peak_memory_gb=None,
        config=f'{method}_r18_digits.py', setting_sha256=f'setting-{method}', overrides={},
        status='ok', extra={},
        protocols={p: dict(settings=dict(k=20) if p == 'knn' else dict(epochs=100),
                           metrics=dict(top1=value)) for p, value in top1.items()})


def simulate(model: Model, reps: int, max_seeds: int = 12, round_size: int = 2,
             start: int = 2, policy: StatsPolicy = StatsPolicy(), seed: int = 0) -> Dict:
    """`reps` runs of the loop from `start` recorded seeds: the share of families with a false
    better/worse (better where the true shift <= 0, worse where >= 0), the share of
    comparisons called better, the mean seeds per method at the end, and the designs' looks."""
    rng = np.random.default_rng(seed)
    false = better = seeds = 0
    looks = None
    with tempfile.TemporaryDirectory() as folder:
        for rep in range(reps):
            stand_in = StandIn(model, rng)
            stand_in.train({BASELINE, METHOD}, list(range(start)))
            path = Path(folder) / f'{rep}.json'
            state = until_decided(path, stand_in, stand_in.train, {BASELINE, METHOD},
                                  [], policy, max_seeds, round_size, out=lambda *a: None)
            looks = state['design']['looks']
            verdicts = [d['verdict'] for d in sequential.decided(state).values()]
            false += any((v == 'better' and model.shift <= 0) or
                         (v == 'worse' and model.shift >= 0) for v in verdicts)
            better += sum(v == 'better' for v in verdicts)
            seeds += state['looks'][-1]['seeds']
    return dict(false=false / reps, better=better / (reps * len(PROTOCOLS)),
                seeds=seeds / reps, looks=looks, reps=reps)


def fixed_power(model: Model, n: int, reps: int, policy: StatsPolicy = StatsPolicy(),
                seed: int = 0) -> float:
    """The share of comparisons a fixed design of n seeds calls better (one look at alpha)."""
    rng = np.random.default_rng(seed)
    better = 0
    for _ in range(reps):
        stand_in = StandIn(model, rng)
        stand_in.train({BASELINE, METHOD}, list(range(n)))
        judged = sequential.judge(stand_in(), policy, policy.alpha)
        better += sum(j['verdict'] == 'better' for j in judged.values())
    return better / (reps * len(PROTOCOLS))


def sequential_table(reps: int = 200, max_seeds: int = 12, round_size: int = 2,
                     shifts: Sequence[float] = (0.0, 1.0, 2.0, 3.0)) -> str:
    """The Markdown table of ``tools/calibrate_stats.py``: per true shift, the sequential
    design's false-verdict rate and power and the seeds it took, and the fixed design of the
    fewest seeds with at least that power."""
    lines = ['| true Δ (top-1 points) | false better/worse per family | called better | mean '
             'seeds per method (sequential) | fixed design with that power: seeds (its power) |',
             '|---|---|---|---|---|']
    looks = None
    for i, shift in enumerate(shifts):
        model = Model(shift=shift)
        got = simulate(model, reps, max_seeds, round_size, seed=10 + i)
        looks = got['looks']
        se = (got['false'] * (1 - got['false']) / reps) ** 0.5
        fixed = '—'
        if shift > 0 and got['better'] > 0:
            for n in range(5, 41):
                power = fixed_power(model, n, reps, seed=100 + i)
                if power >= got['better']:
                    fixed = f'{n} ({power:.2f})'
                    break
            else:
                fixed = '> 40'
        lines.append(f"| {shift:+g} | {got['false']:.3f} ± {se:.3f} | {got['better']:.2f} | "
                     f"{got['seeds']:.1f} | {fixed} |")
    model = Model()
    lines += ['', f'Design: {sequential.SPENDING}, alpha 0.05, family of 2 (kNN and the fast '
              f'linear probe, MixCo against MoCo-v2), 2 seeds recorded, looks at '
              f"{', '.join(str(n) for n in looks or [])} seeds (--max-seeds {max_seeds} "
              f'--round {round_size}). Model: top-1 on {TEST_IMAGES} test images, baseline '
              f'mean {model.mean:g}, seed effect SD {model.seed_sd:g} (shared by the methods of '
              f'a seed), run SD {model.run_sd:g}, protocol noise SD {model.protocol_sd:g}; '
              f'{reps} simulated suites per line, ± one Monte Carlo standard error. Generated by '
              '`tools/calibrate_stats.py`.']
    return '\n'.join(lines) + '\n'
