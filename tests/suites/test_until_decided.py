"""Seeds until decided: the design (looks, levels that spend alpha, the first look where a
verdict is possible), the loop with stand-in training (the family's error over all looks by
simulation, decisions that stop a method's seeds, an interruption that continues the same
design, a changed design refused), and the command line's dry run."""
import json

import numpy as np
import pytest

from benchmark.reports import sequential
from benchmark.reports.comparisons import StatsPolicy
from benchmark.suites.spec import SuiteError
from benchmark.suites.until_decided import (needed_methods, read_state, seed_sequence,
                                            until_decided)
from benchmark.suites.until_decided_sim import (BASELINE, METHOD, Model, StandIn, fixed_power,
                                                simulate)


def test_the_looks_spend_alpha_and_start_where_a_verdict_is_possible():
    design = sequential.make_design(2, 12, 2, family_size=2)
    assert design.looks == (8, 10, 12)  # 2/2^7 > 0.05 * 7/12 / 2; 2/2^8 <= 0.05 * 8/12 / 2
    assert sum(design.alphas) == pytest.approx(0.05)
    assert design.alphas[0] == pytest.approx(0.05 * 8 / 12)
    for n, level in zip(design.looks, np.cumsum(design.alphas)):
        assert level == pytest.approx(0.05 * n / 12)
    assert sequential.make_design(9, 12, 5, 1).looks == (9, 12)  # the recorded seeds first
    assert sequential.make_design(0, 20, 3, 1).looks == (7, 10, 13, 16, 19, 20)  # 2/2^6 > 0.015
    with pytest.raises(ValueError, match='--max-seeds 6 is too few .* needs at least 7'):
        sequential.make_design(2, 6, 2, family_size=2)


def test_a_look_where_no_verdict_is_possible_passes_its_alpha_on():
    design = sequential.make_design(2, 12, 1, family_size=4)
    assert design.looks == (8, 10, 11, 12)  # at 9 seeds 2/2^9 > (0.05 / 12) / 4: left out
    assert design.alphas[1] == pytest.approx(0.05 * 2 / 12)  # look 10 spends 9's share too
    assert all(sequential.smallest_p(n) <= a / 4 for n, a in zip(design.looks, design.alphas))
    assert sum(design.alphas) == pytest.approx(0.05)
    with pytest.raises(ValueError, match='15 seeds of every method are recorded already, more '
                                         'than --max-seeds 12: raise --max-seeds to at least 15'):
        sequential.make_design(15, 12, 2, 2)


def test_a_comparison_decided_before_counts_as_p_1_and_only_the_looks_seeds_count():
    stand_in = StandIn(Model(shift=4.0, seed_sd=0.3), np.random.default_rng(3))
    stand_in.train({BASELINE, METHOD}, list(range(10)))
    everything = sequential.judge(stand_in(), StatsPolicy(), 0.05)
    first8 = sequential.judge(stand_in(), StatsPolicy(), 0.05, seeds=range(8))
    assert {j['n'] for j in everything.values()} == {10} and {
        j['n'] for j in first8.values()} == {8}
    keys = sorted(everything)
    closed = sequential.judge(stand_in(), StatsPolicy(), 0.05, closed=['|'.join(keys[0])])
    ps = sorted(j['p'] for j in everything.values())
    assert closed[keys[1]]['p_holm'] == pytest.approx(min(1.0, 2 * everything[keys[1]]['p']))
    assert everything[keys[1]]['p_holm'] <= closed[keys[1]]['p_holm'] and ps[0] < 0.05


def test_seed_sequence_takes_the_suites_seeds_then_the_next_ones():
    assert seed_sequence([3, 1, 2], 5) == [1, 2, 3, 4, 5]
    assert seed_sequence([], 3) == [0, 1, 2]


def run(stand_in, path, max_seeds=12, round_size=2, methods=(BASELINE, METHOD), **kw):
    return until_decided(path, stand_in, stand_in.train, set(methods), [], StatsPolicy(**kw),
                         max_seeds, round_size, out=lambda *a: None)


@pytest.mark.slow
def test_no_difference_keeps_the_familys_error_over_all_looks_at_most_alpha():
    got = simulate(Model(shift=0.0), reps=200, seed=1)
    se = (0.05 * 0.95 / 200) ** 0.5
    assert got['false'] <= 0.05 + 2 * se
    assert got['looks'] == [8, 10, 12]


def test_an_effect_is_mostly_decided_at_the_first_look():
    got = simulate(Model(shift=2.0), reps=60, seed=2)
    assert got['false'] == 0 and got['better'] >= 0.8
    assert got['seeds'] < 10  # most decided at the first look (8 seeds)
    assert fixed_power(Model(shift=2.0), 8, 60, seed=3) >= 0.7


def test_a_decided_comparison_stops_its_methods_seeds_and_keeps_its_decision(tmp_path):
    """MixCo is far better (decided at the first look); i-Mix equals the baseline (open):
    only i-Mix and the baseline get more seeds."""
    stand_in = StandIn(Model(shift=6.0, seed_sd=0.5), np.random.default_rng(0))
    methods = (BASELINE, METHOD, 'imix')
    stand_in.train(set(methods), [0, 1])
    state = run(stand_in, tmp_path / 's.json', methods=methods)
    first = state['looks'][0]
    assert {k.split('|')[0] for k in first['decided']} == {METHOD}
    assert needed_methods(dict(state, looks=state['looks'][:1]), set(methods)) == {BASELINE,
                                                                                 'imix'}
    seeds = {m: max(s for mm, s in stand_in.trained if mm == m) + 1 for m in methods}
    assert seeds[METHOD] == first['seeds'] < seeds['imix'] == seeds[BASELINE]
    done = sequential.decided(state)
    assert all(done[k]['look'] == 1 and done[k]['verdict'] == 'better' for k in first['decided'])


def test_an_interrupted_loop_continues_the_same_design_to_the_same_decisions(tmp_path):
    whole = StandIn(Model(shift=1.0), np.random.default_rng(4))
    whole.train({BASELINE, METHOD}, [0, 1])
    expected = run(whole, tmp_path / 'whole.json')

    stand_in = StandIn(Model(shift=1.0), np.random.default_rng(4))
    stand_in.train({BASELINE, METHOD}, [0, 1])
    calls = []
    real = stand_in.train

    def interrupted(methods, seeds):  # stopped during the second round
        calls.append(seeds[-1])
        return real(methods, seeds) if len(calls) != 2 else False

    path = tmp_path / 'seq.json'
    state = until_decided(path, stand_in, interrupted, {BASELINE, METHOD}, [], StatsPolicy(),
                          12, 2, out=lambda *a: None)
    if len(expected['looks']) > 1:
        assert state['interrupted'] and len(read_state(path)['looks']) == 1
    again = run(stand_in, path)
    assert again['design'] == expected['design']
    assert [look['decided'] for look in again['looks']] == [
        look['decided'] for look in expected['looks']]
    with pytest.raises(SuiteError, match='holds a design with --max-seeds 12 --round 2'):
        run(stand_in, path, max_seeds=16)


def test_the_state_file_records_the_design_and_every_look(tmp_path):
    stand_in = StandIn(Model(shift=0.0), np.random.default_rng(5))
    stand_in.train({BASELINE, METHOD}, [0, 1])
    run(stand_in, tmp_path / 's.json')
    saved = json.loads((tmp_path / 's.json').read_text())
    assert saved['design']['spending'] == sequential.SPENDING
    assert [look['seeds'] for look in saved['looks']] == saved['design']['looks'][
        :len(saved['looks'])]
    lines = sequential.summary_lines(saved)
    assert lines[0].startswith('**Seeds until decided**') and len(lines) >= 7
    (tmp_path / 'bad.json').write_text('{not json')
    with pytest.raises(SuiteError, match='bad.json is not a sequential design'):
        read_state(tmp_path / 'bad.json')


def test_the_dry_run_prints_the_design_and_the_most_runs(capsys, tmp_path):
    from tools.run_suite import main
    assert main(['demo_digits', '--until-decided', '--max-seeds', '10', '--dry-run',
                 '--results-root', str(tmp_path / 'r'), '--no-wandb']) == 0
    text = capsys.readouterr().out
    assert 'until decided, at most 10 seeds per method, 2 per round' in text
    assert 'the first round trains seeds [0, 1, 2, 3, 4] of each method' in text
    with pytest.raises(ValueError, match='--max-seeds and --round go with --until-decided'):
        main(['demo_digits', '--max-seeds', '10', '--dry-run'])


def test_its_block_in_a_page_is_apart_from_the_suites_fixed_seed_block(tmp_path):
    from tools.run_suite import main
    page = tmp_path / 'page.md'
    page.write_text('<!-- results: demo_digits -->\n<!-- /results: demo_digits -->\n')
    with pytest.raises(ValueError, match='<!-- results: demo_digits_until_decided -->'):
        main(['demo_digits', '--until-decided', '--dry-run', '--publish', str(page),
              '--results-root', str(tmp_path / 'r'), '--no-wandb'])


def test_a_dry_run_against_a_recorded_design_with_other_limits_is_refused(tmp_path):
    from tools.run_suite import main
    stand_in = StandIn(Model(), np.random.default_rng(6))
    stand_in.train({BASELINE, METHOD}, [0, 1])
    folder = tmp_path / 'r' / 'suites' / 'demo_digits'
    run(stand_in, folder / 'sequential.json')
    with pytest.raises(ValueError, match='holds a design with --max-seeds 12 --round 2'):
        main(['demo_digits', '--until-decided', '--max-seeds', '10', '--dry-run',
              '--results-root', str(tmp_path / 'r'), '--no-wandb'])
