"""Calibration of the verdicts by simulation through the real path (records -> rows ->
comparisons -> verdicts), on records like the digits ones (a one-image grid, seed noise, a
shared seed effect): false verdicts per family at most alpha within Monte Carlo error at 3, 5
and 10 seeds, interval coverage at least 93% from min_seeds on, equivalence at its margin at
most alpha."""
import math

import pytest

from benchmark.reports.calibration import Model, monte_carlo_se, simulate
from benchmark.reports.comparisons import StatsPolicy

REPS = 400
ALPHA = 0.05


@pytest.mark.slow
@pytest.mark.parametrize('n', [3, 5, 10])
def test_no_difference_gives_false_verdicts_at_most_alpha_and_intervals_cover(n):
    result = simulate(Model(), n, REPS, seed=n)
    assert result['false'] <= ALPHA + 3 * monte_carlo_se(ALPHA, REPS)
    if n >= StatsPolicy().min_seeds:
        assert result['mean_coverage'] >= 0.93 - 3 * monte_carlo_se(0.93, 4 * REPS)
        if n >= 7:  # a family of 3 at 0.05 needs 7 seeds for its intervals (and any verdict)
            floor = 0.93 - 3 * monte_carlo_se(0.93, result['intervals'])
            assert result['intervals'] == 3 * REPS and result['delta_coverage'] >= floor
        else:  # no Δ interval at a level the seeds cannot reach: the differences, seed by seed
            assert result['intervals'] == 0
    else:
        assert math.isnan(result['delta_coverage']) and result['better'] == 0


@pytest.mark.slow
def test_a_true_effect_is_found_and_its_interval_covers():
    result = simulate(Model(shifts=(2.0, 2.0, -2.0)), 10, REPS, seed=1)
    assert result['false'] <= ALPHA + 3 * monte_carlo_se(ALPHA, REPS)
    assert result['better'] > 0.5  # two of three comparisons are better, most of the time
    assert result['delta_coverage'] >= 0.93 - 3 * monte_carlo_se(0.93, result['intervals'])


@pytest.mark.slow
@pytest.mark.parametrize('n', [5, 10])
def test_equivalence_at_the_margin_is_claimed_at_most_alpha(n):
    margin = 1.0
    edge = simulate(Model(shifts=(margin, -margin, margin)), n, REPS,
                    StatsPolicy(equivalence_margin=margin), seed=50 + n)
    assert edge['equivalent'] <= ALPHA + 3 * monte_carlo_se(ALPHA, edge['comparisons'])
    inside = simulate(Model(noise_sd=0.3, shifts=(0.0, 0.0, 0.0)), 10, 50,
                      StatsPolicy(equivalence_margin=margin), seed=70)
    assert inside['equivalent'] > 0.5  # and equivalence is reachable when it holds
