"""The comparison procedure end to end through `build_rows` on constructed records, each claim
against an independent reference (every sign pattern enumerated, the test inverted by brute
force, scipy's exact binomial interval, a naive Holm loop): p-values that never go below what
the seeds allow, intervals that never leave a metric's range, P(better) with a real interval,
nothing claimed under min_seeds, Holm within a family (exploratory rows never move a primary
verdict), verdicts that agree with their intervals, equivalence only with a declared margin,
seeds left out of a pairing named, and baselines matched on their protocol settings."""
import csv
import io
import math
import re

import numpy as np
import pytest
from scipy import stats as sps

from benchmark.reports.comparisons import SUITE, StatsPolicy
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.records import build_record
from benchmark.reports.tables import render_csv, render_markdown
from benchmark.reports.verdicts import verdict, verdicts
from tests.reports.references import clopper_pearson, inverted, naive_holm, sign_p

pytestmark = pytest.mark.usefixtures('quick_provenance')

STEP = 100 / 360  # one image of a 360-image test set, in top-1 points
TAU = {'model.mix_temperature': 0.1}
DELTA_COLUMN = 'Δ top1 vs baseline, interval (higher is better)'
# Rows show a method by its label in benchmark/names.py METHODS.
MIXCO, MOCO = 'MixCo (MoCo-v2)', 'MoCo-v2'


# Records and rows

def rec(method, seed, value, *, protocol='linear_paper', eval_data='tiny-imagenet',
        overrides=None, settings=None, status='ok', epochs=100):
    if protocol == 'cluster':
        metrics = dict(davies_bouldin=value, calinski_harabasz=10.0, kmeans_nmi=0.5,
                       kmeans_ari=0.25)
    else:
        metrics = {'top1': value}
    return build_record(method=method, backbone='resnet18', pretrain_data='tiny-imagenet',
                        pretrain_epochs=epochs, eval_data=eval_data, seed=seed, world_size=2,
                        total_batch=128, status=status, config=f'{method}_r18_tiny.py',
                        setting_text=f'{method} {sorted((overrides or {}).items())}',
                        overrides=overrides,
                        protocols={protocol: {'settings': dict(settings or {}),
                                              'metrics': metrics}})


def series(method, values, **kwargs):
    return [rec(method, seed, value, **kwargs) for seed, value in values.items()]


def shifted(base, diffs):
    return {seed: base[seed] + d for seed, d in zip(sorted(base), diffs)}


def baseline(n, mean=40.0):
    return {s: mean + 0.37 * ((s * 7) % 5) for s in range(n)}


def ours(rows, **match):
    found = [r for r in rows if r['source'] == SUITE and all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, [r['label'] for r in found])
    return found[0]


def compared(rows):
    return [r for r in rows if r['source'] == SUITE and (r['compare'] or {}).get('paired')]


def md_cells(text):
    """{(eval data, protocol, method label): {column: cell}} of every Markdown table row."""
    out, header = {}, None
    for line in text.splitlines():
        if line.startswith('|---'):
            continue
        if not line.startswith('| '):
            header = None
            continue
        cells = [c.strip() for c in line.strip('|').split(' | ')]
        if header is None:
            header = cells
        else:
            row = dict(zip(header, cells))
            out[(row['eval data'], row['protocol'], row['method'])] = row
    return out


def csv_rows(rows):
    return {(r['eval_data'], r['protocol'], r['method_label']): r
            for r in csv.DictReader(io.StringIO(render_csv(rows)))
            if r['source'] == SUITE and r['status'] == 'ok'}


def bracketed(cell_text):
    """The pairs of numbers printed in brackets in a cell: '[+0.28, +0.56]' -> [(0.28, 0.56)]."""
    return [tuple(float(x) for x in inner.split(', '))
            for inner in re.findall(r'\[([^\]]+)\]', cell_text)]


def fewest_seeds(alpha):
    """The fewest seeds whose two-sided sign-flip test can reach alpha: 2/2^n <= alpha."""
    return next(n for n in range(1, 64) if 2 / 2 ** n <= alpha)


# p never below what the seeds allow

def grid_records(n):
    """Accuracies on a 360-image test set: MixCo classifies one more image than MoCo-v2 on
    every seed; the differences are one step up to float round-off."""
    correct = {s: 300 + (7 * s) % 11 for s in range(n)}
    return (series('mocov2', {s: c * 100 / 360 for s, c in correct.items()}, protocol='knn')
            + series('mixco', {s: (c + 1) * 100 / 360 for s, c in correct.items()},
                     protocol='knn'))


@pytest.mark.parametrize('n', [3, 6])
def test_near_constant_differences_on_a_one_image_grid_give_p_two_over_two_to_the_n(n):
    records = grid_records(n)
    mine, theirs = ({r['seed']: r['protocols']['knn']['metrics']['top1'] for r in records
                     if r['method'] == m} for m in ('mixco', 'mocov2'))
    diffs = [mine[s] - theirs[s] for s in range(n)]
    assert max(diffs) - min(diffs) < 1e-12 and abs(np.mean(diffs) - STEP) < 1e-12
    assert len(set(diffs)) > 1  # not bit-equal: a t-test would call this certain
    assert sps.ttest_rel(list(mine.values()), list(theirs.values())).pvalue < 1e-10
    policies = [StatsPolicy(), StatsPolicy(min_seeds=3)] if n == 3 else [StatsPolicy()]
    for policy in policies:
        rows = build_rows(records, policy=policy)
        compare = ours(rows, method='mixco')['compare']
        paired = compare['paired']
        if n < policy.min_seeds:
            assert compare['verdict'] == 'too few seeds'
            assert paired['p'] is None and compare['p_holm'] is None
            continue
        assert paired['p'] == 2 / 2 ** n == sign_p(diffs) == paired['p_floor']
        assert compare['p_holm'] == paired['p']  # alone in its family
        cells = md_cells(render_markdown(rows, 'now'))[('tiny-imagenet', 'kNN', MIXCO)]
        assert cells['sign-flip test'] == f"p {2 / 2 ** n:.2g}, Holm {2 / 2 ** n:.2g}"
        assert float(csv_rows(rows)[('tiny-imagenet', 'knn', MIXCO)]['p_signflip']) == \
            2 / 2 ** n
        # 3 seeds can never reach 0.05; 6 seeds of one sign reach 2/64
        assert compare['verdict'] == ('better' if n == 6 else 'undecided')


# No interval leaves a metric's range

NEAR_TOP = {'mocov2': [99.72, 100.0, 100.0, 99.44, 100.0, 99.72, 100.0],
            'mixco': [100.0, 100.0, 99.72, 100.0, 100.0, 100.0, 99.44]}


def t_upper(values):
    x = np.asarray(values, np.float64)
    return x.mean() + sps.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)


@pytest.mark.parametrize('n', [5, 6, 7])
def test_accuracies_near_100_give_no_interval_outside_0_100(n):
    values = {m: dict(enumerate(v[:n])) for m, v in NEAR_TOP.items()}
    assert any(t_upper(list(v.values())) > 100 for v in values.values())  # a t interval would
    rows = build_rows(series('mocov2', values['mocov2']) + series('mixco', values['mixco']))
    diffs = [values['mixco'][s] - values['mocov2'][s] for s in range(n)]
    for row in (r for r in rows if r['source'] == SUITE):
        top1 = row['metrics']['top1']
        low, high, level = inverted(list(values[row['method']].values()), 0.05)
        assert top1['ci'] == pytest.approx((low, high), abs=1e-8)
        assert top1['ci_level'] == pytest.approx(level)
        assert 0 <= min(values[row['method']].values()) <= top1['ci'][0] <= top1['ci'][1] \
            <= max(values[row['method']].values()) <= 100
    paired = ours(rows, method='mixco')['compare']['paired']
    if n == 5:  # 5 seeds cannot reach 0.05 (2/32 > 0.05): no Δ interval at all
        assert paired['ci'] is None
    else:
        assert min(diffs) <= paired['ci'][0] <= paired['ci'][1] <= max(diffs)
    assert 0 <= paired['wins']['ci'][0] <= paired['wins']['ci'][1] <= 1
    cells = md_cells(render_markdown(rows, 'now'))
    for label in (MOCO, MIXCO):
        (interval,) = bracketed(cells[('tiny-imagenet', 'linear (paper protocol)', label)]
                                ['top1 interval'])
        assert 0 <= interval[0] <= interval[1] <= 100
    delta, wins = (cells[('tiny-imagenet', 'linear (paper protocol)', MIXCO)][c]
                   for c in (DELTA_COLUMN, 'P(better), 95% CI'))
    for interval in bracketed(delta):
        assert min(diffs) - 0.005 <= interval[0] <= interval[1] <= max(diffs) + 0.005
    assert len(bracketed(delta)) == (n > 5)
    assert 0 <= bracketed(wins)[0][0] <= bracketed(wins)[0][1] <= 1
    for row in csv_rows(rows).values():
        for column in ('ci_low', 'ci_high', 'range_low', 'range_high'):
            assert 0 <= float(row[column]) <= 100
    mixco = csv_rows(rows)[('tiny-imagenet', 'linear_paper', MIXCO)]
    if n > 5:
        assert min(diffs) <= float(mixco['paired_ci_low']) <= float(mixco['paired_ci_high']) \
            <= max(diffs)
    else:
        assert mixco['paired_ci_low'] == mixco['paired_ci_high'] == ''
    assert 0 <= float(mixco['p_improve_low']) <= float(mixco['p_improve_high']) <= 1


# P(better) with a real interval

def test_fully_separated_seeds_give_p_better_one_with_a_lower_end_below_one():
    base = baseline(6)
    rows = build_rows(series('mocov2', base) + series('mixco', shifted(base, [0.5, 1.2, 0.8,
                                                                                2.0, 0.3, 1.1])))
    wins = ours(rows, method='mixco')['compare']['paired']['wins']
    low, high = clopper_pearson(6, 6)
    assert (wins['wins'], wins['ties'], wins['losses'], wins['share']) == (6, 0, 0, 1.0)
    assert wins['ci'] == pytest.approx((low, high), abs=1e-9) and wins['ci'][0] < 1 == high
    assert low == pytest.approx(0.025 ** (1 / 6))  # the closed form: (alpha/2)^(1/n)
    cells = md_cells(render_markdown(rows, 'now'))[
        ('tiny-imagenet', 'linear (paper protocol)', MIXCO)]
    assert cells['P(better), 95% CI'] == f'1.00 [{low:.2f}, 1.00] (6/6 won)'
    parsed = csv_rows(rows)[('tiny-imagenet', 'linear_paper', MIXCO)]
    assert float(parsed['p_improve']) == 1.0 and float(parsed['p_improve_low']) < 1


# Two seeds: a range, how many more seeds, nothing else

def test_two_seed_rows_show_their_range_and_the_seeds_a_verdict_needs():
    rows = build_rows(series('mocov2', {0: 40.0, 1: 41.5}) + series('mixco', {0: 42.0, 1: 44.0}))
    cells = md_cells(render_markdown(rows, 'now'))
    table = ('tiny-imagenet', 'linear (paper protocol)')
    assert cells[table + (MOCO,)]['top1 interval'] == 'range [40.00, 41.50]'
    mixco = cells[table + (MIXCO,)]
    assert mixco['top1 interval'] == 'range [42.00, 44.00]'
    need = max(5, fewest_seeds(0.05))
    assert need == 6
    assert mixco[DELTA_COLUMN] == f'+2.25 vs {MOCO} (2 paired seeds); per seed +2.00, +2.50'
    assert mixco['sign-flip test'] == f'n=2 < 5: no test; a verdict needs {need} seeds'
    assert mixco['verdict (family, size)'] == 'too few seeds (primary, 1)'
    assert mixco['P(better), 95% CI'] == ''
    row = ours(rows, method='mixco')
    assert row['compare']['paired']['wins'] is None and row['compare']['paired']['ci'] is None
    sentence = verdict(row)
    head = (f'{MIXCO} vs {MOCO}, linear (paper protocol) on tiny-imagenet (primary family of 1): '
            'Δ +2.25 top-1 points, n = 2 (per seed +2.00, +2.50): ')
    assert sentence.startswith(head)
    assert 'min_seeds 5' in sentence or 'the 5 paired seeds' in sentence
    # how many seeds a verdict needs: 4 more, 6 in all
    assert re.search(rf'\b({need - 2} more|{need} paired seeds)\b', sentence), sentence
    assert 'P(better)' not in sentence
    parsed = csv_rows(rows)[('tiny-imagenet', 'linear_paper', MIXCO)]
    assert parsed['ci_low'] == parsed['paired_ci_low'] == parsed['p_improve'] == ''
    assert parsed['p_signflip'] == '' and parsed['verdict'] == 'too few seeds'
    assert (float(parsed['range_low']), float(parsed['range_high'])) == (42.0, 44.0)


# Families

def family_records(exploratory=True):
    """Primary: MixCo vs MoCo-v2 by the paper's linear protocol and by kNN (7 seeds each).
    Exploratory: a temperature variant, the transfer to cifar10, cluster indices."""
    base = baseline(7)
    records = (series('mocov2', base) + series('mixco', shifted(base, [1.1, 0.9, 1.4, 0.7, 1.2,
                                                                       1.0, 0.8]))
               + series('mocov2', base, protocol='knn')
               + series('mixco', shifted(base, [0.6, -0.4, 0.9, 0.3, -0.2, 1.1, 0.5]),
                        protocol='knn'))
    if exploratory:
        records += series('mixco', shifted(base, [2.0, 1.5, 1.8, 2.2, 1.7, 1.9, 2.1]),
                          overrides=TAU)
        records += (series('mocov2', base, eval_data='cifar10')
                    + series('mixco', shifted(base, [0.5, 0.7, 0.4, 0.9, 0.6, 0.8, 0.3]),
                             eval_data='cifar10'))
        db = {s: 2.0 + 0.01 * s for s in range(7)}
        records += (series('mocov2', db, protocol='cluster')
                    + series('mixco', shifted(db, [-0.2, -0.1, -0.3, -0.15, -0.25, -0.1, -0.2]),
                             protocol='cluster'))
    return records


def family_of_rows(rows, name):
    return [r for r in compared(rows) if r['compare']['family'] == name]


def check_holm_per_family(rows):
    for name in ('primary', 'exploratory'):
        members = family_of_rows(rows, name)
        p = [r['compare']['paired']['p'] for r in members]
        for row, adjusted in zip(members, naive_holm(p) if p else []):
            assert row['compare']['p_holm'] == pytest.approx(adjusted, abs=1e-15)
            assert row['compare']['family_size'] == len(members)
            assert (row['compare']['verdict'] in ('better', 'worse')) == (adjusted <= 0.05)


def test_exploratory_rows_do_not_move_a_primary_comparison():
    alone, everything = build_rows(family_records(False)), build_rows(family_records())
    for rows in (alone, everything):
        check_holm_per_family(rows)
    primary = [(r['protocol'], r['compare']['paired']['p'], r['compare']['p_holm'],
                r['compare']['verdict'], r['compare']['family_size'])
               for r in family_of_rows(alone, 'primary')]
    assert primary == [(r['protocol'], r['compare']['paired']['p'], r['compare']['p_holm'],
                        r['compare']['verdict'], r['compare']['family_size'])
                       for r in family_of_rows(everything, 'primary')]
    linear = ours(everything, method='mixco', protocol='linear_paper', eval_data='tiny-imagenet',
                  overrides={})
    assert linear['compare']['paired']['p'] == 2 / 2 ** 7 and linear['compare']['verdict'] == \
        'better'
    explored = family_of_rows(everything, 'exploratory')
    assert sorted((r['label'], r['eval_data'], r['protocol']) for r in explored) == [
        (MIXCO, 'cifar10', 'linear_paper'), (MIXCO, 'tiny-imagenet', 'cluster'),
        (f'{MIXCO} [model.mix_temperature=0.1]', 'tiny-imagenet', 'linear_paper')]
    # One table-wide family would have taken the primary verdict back.
    pooled = naive_holm([r['compare']['paired']['p'] for r in compared(everything)])
    assert pooled[compared(everything).index(linear)] > 0.05
    cells = md_cells(render_markdown(everything, 'now'))
    assert cells[('tiny-imagenet', 'linear (paper protocol)', MIXCO)][
        'verdict (family, size)'] == 'better (primary, 2)'
    assert cells[('cifar10', 'linear (paper protocol)', MIXCO)][
        'verdict (family, size)'].endswith('(exploratory, 3)')


def test_a_declared_primary_family_moves_comparisons_between_families():
    rows = build_rows(family_records(), policy=StatsPolicy(primary_protocols=('knn',)))
    check_holm_per_family(rows)
    (knn,) = family_of_rows(rows, 'primary')
    assert (knn['protocol'], knn['eval_data'], knn['compare']['family_size']) == \
        ('knn', 'tiny-imagenet', 1)
    assert knn['compare']['p_holm'] == knn['compare']['paired']['p']
    linear = ours(rows, method='mixco', protocol='linear_paper', eval_data='tiny-imagenet',
                  overrides={})
    assert linear['compare']['family'] == 'exploratory'
    assert linear['compare']['family_size'] == 4
    default = ours(build_rows(family_records()), method='mixco', protocol='linear_paper',
                   eval_data='tiny-imagenet', overrides={})
    assert linear['compare']['p_holm'] > default['compare']['p_holm']
    assert '(primary family of 1)' in verdict(knn)
    assert '(exploratory family of 4)' in verdict(linear)
    said = verdicts(rows)
    decided = [verdict(r) for r in compared(rows) if r['compare']['verdict'] in (
        'better', 'worse', 'equivalent')]
    assert said[:len(decided)] == decided and len(said) == len(decided) + 1
    assert re.fullmatch(r'\d+ comparisons? undecided or with too few seeds \(.*exploratory '
                        r'family: .*\): see the table\.', said[-1]), said[-1]


# A verdict agrees with its interval

def agreement_cases():
    rng = np.random.default_rng(5)
    cases = {'families': lambda: build_rows(family_records()),
             'near 100, 6 seeds': lambda: build_rows(
                 series('mocov2', dict(enumerate(NEAR_TOP['mocov2'][:6])))
                 + series('mixco', dict(enumerate(NEAR_TOP['mixco'][:6]))))}
    for n in (7, 8, 9):
        base = baseline(n)
        draws = [rng.normal(shift, 1.0, n) for shift in (0.0, 1.5, -1.2)]
        cases[f'random, {n} seeds, family of 3'] = lambda base=base, draws=draws: build_rows(
            series('mocov2', base) + series('mocov2', base, protocol='knn')
            + series('mocov2', base, protocol='linear_fast')
            + series('mixco', shifted(base, draws[0]))
            + series('mixco', shifted(base, draws[1]), protocol='knn')
            + series('mixco', shifted(base, np.round(draws[2] / STEP) * STEP),
                     protocol='linear_fast'))
    return cases


def out_of_reach_cases():
    """Seeds too few for the level Holm judges at, with every difference of one sign: 5 seeds
    (the default min_seeds) alone in a family, 6 seeds in a family of three, 7 seeds in the
    exploratory family of four a declared primary family leaves."""
    base5, base6 = baseline(5), baseline(6)
    return {'declared primary, 7 seeds, family of 4': lambda: build_rows(
                family_records(), policy=StatsPolicy(primary_protocols=('knn',))),
            '5 seeds, family of 1': lambda: build_rows(
                series('mocov2', base5) + series('mixco', shifted(base5, [1.0, 1.1, 1.2, 1.3,
                                                                          1.4]))),
            '6 seeds, family of 3': lambda: build_rows(
                series('mocov2', base6) + series('mocov2', base6, protocol='knn')
                + series('mocov2', base6, protocol='linear_fast')
                + series('mixco', shifted(base6, [1.0, 1.1, 1.2, 1.3, 1.4, 0.9]))
                + series('mixco', shifted(base6, [0.2, -0.3, 0.1, 0.4, -0.1, 0.0]),
                         protocol='knn')
                + series('mixco', shifted(base6, [0.3, -0.3, 0.2, -0.2, 0.1, 0.0]),
                         protocol='linear_fast'))}


def check_agreement(rows):
    checked = 0
    for row in compared(rows):
        compare, paired = row['compare'], row['compare']['paired']
        if paired['p'] is None:
            continue
        ci = paired['ci']
        excludes = ci is not None and (ci[0] > 0 or ci[1] < 0)
        assert excludes == (compare['verdict'] in ('better', 'worse')), (
            row['label'], row['protocol'], ci, paired['ci_level'], compare['verdict'])
        checked += 1
        # the interval is the inverted test at Holm's level, where n seeds can reach it
        reachable = 2 / 2 ** paired['n'] <= compare['level']
        assert (ci is not None) == reachable
        if reachable:
            low, high, level = inverted(paired['diffs'], compare['level'])
            assert ci == pytest.approx((low, high), abs=1e-8)  # stats rounds to 8 decimals
            assert paired['ci_level'] == pytest.approx(level) and level >= 1 - compare['level']
    assert checked


def all_cases():
    return {**agreement_cases(), **out_of_reach_cases()}


@pytest.mark.parametrize('case', list(all_cases()))
def test_zero_is_outside_the_delta_interval_exactly_when_the_verdict_is_better_or_worse(case):
    check_agreement(all_cases()[case]())


@pytest.mark.parametrize('case', list(out_of_reach_cases()))
def test_where_the_seeds_cannot_reach_holms_level_no_delta_interval_is_shown(case):
    """Every difference of one sign, but too few seeds for the level Holm judges at: no
    interval (the range of the differences would exclude 0 beside an 'undecided'), the
    differences seed by seed instead, in the table and in the sentence."""
    rows = out_of_reach_cases()[case]()
    row = next(r for r in compared(rows) if min(r['compare']['paired']['diffs']) > 0)
    compare, paired = row['compare'], row['compare']['paired']
    assert 2 / 2 ** paired['n'] > compare['level'] and compare['verdict'] == 'undecided'
    assert paired['ci'] is None and paired['ci_level'] is None and paired['p'] is not None
    cells = md_cells(render_markdown(rows, 'now'))[
        (row['eval_data'], 'linear (paper protocol)', row['label'])]
    assert bracketed(cells[DELTA_COLUMN]) == [] and 'per seed' in cells[DELTA_COLUMN]
    assert cells['sign-flip test'].startswith(f"p {paired['p']:.2g}, Holm ")
    sentence = verdict(row)
    assert 'per seed' in sentence and 'undecided' in sentence
    assert 'sign-flip interval' not in sentence


# Equivalence needs a declared margin

def equivalence_records():
    base = baseline(6)
    return (series('mocov2', base)
            + series('mixco', shifted(base, [0.1, -0.1, 0.05, -0.05, 0.0, 0.1])))


def test_tight_differences_near_zero_are_equivalent_only_within_a_declared_margin():
    diffs = [0.1, -0.1, 0.05, -0.05, 0.0, 0.1]
    rows = build_rows(equivalence_records(), policy=StatsPolicy(equivalence_margin=0.5))
    row = ours(rows, method='mixco')
    compare = row['compare']
    assert compare['verdict'] == 'equivalent'
    low, high, level = inverted(diffs, 2 * 0.05 / 1)  # 1 - 2 alpha / m, m = 1
    eq = compare['equivalence']
    assert eq['ci'] == pytest.approx((low, high), abs=1e-8) and eq['level'] == pytest.approx(level)
    assert level >= 0.9 and -0.5 < low <= high < 0.5 and eq['margin'] == 0.5
    assert compare['paired']['p'] == pytest.approx(sign_p(diffs)) and sign_p(diffs) > 0.05
    assert 'equivalent within ±0.50' in verdict(row)
    assert md_cells(render_markdown(rows, 'now'))[
        ('tiny-imagenet', 'linear (paper protocol)', MIXCO)]['verdict (family, size)'] == \
        'equivalent (primary, 1)'
    for policy in (StatsPolicy(), StatsPolicy(equivalence_margin=0.05)):
        rows = build_rows(equivalence_records(), policy=policy)
        row = ours(rows, method='mixco')
        assert row['compare']['verdict'] == 'undecided'
        sentence = verdict(row)
        assert 'undecided with 6 seeds' in sentence
        assert ('not shown equivalent within ±0.05' in sentence) == bool(
            policy.equivalence_margin)
        text = render_markdown(rows, 'now', verdicts=verdicts(rows)) + render_csv(rows)
        assert 'no difference' not in text.lower()


# Seeds left out of a pairing are named

def test_a_diverged_seed_and_a_seed_only_one_row_has_are_named():
    base = baseline(7)
    mine = shifted(base, [1.0, 0.8, 1.3, 0.5, 1.1, 0.9, 0.7])
    del mine[3]
    mine[9] = 41.0  # no baseline run for seed 9
    records = (series('mocov2', base) + series('mixco', mine)
               + [rec('mixco', 3, 'NA(diverged)', status='diverged')])
    rows = build_rows(records)
    row = ours(rows, method='mixco', status='ok')
    compare = row['compare']
    assert compare['paired']['seeds'] == [0, 1, 2, 4, 5, 6]
    assert compare['left_out'] == [f'seed 3: {MIXCO} diverged', f'seed 9: only {MIXCO} has it']
    assert verdict(row).endswith(
        f'; left out of the pairing: seed 3: {MIXCO} diverged; seed 9: only {MIXCO} has it.')
    assert csv_rows(rows)[('tiny-imagenet', 'linear_paper', MIXCO)]['left_out'] == \
        f'seed 3: {MIXCO} diverged; seed 9: only {MIXCO} has it'
    # the baseline's own extra seed, under min_seeds too
    few = build_rows(series('mocov2', {0: 40.0, 1: 41.0, 2: 39.0})
                     + series('mixco', {0: 42.0, 1: 43.0}))
    assert ours(few, method='mixco')['compare']['left_out'] == [f'seed 2: only {MOCO} has it']
    assert verdict(ours(few, method='mixco')).endswith(
        f'; left out of the pairing: seed 2: only {MOCO} has it.')


# Baselines share the protocol's settings

def test_baselines_evaluated_with_other_protocol_settings_are_not_used():
    knn = dict(temperature=0.1, split='train->test')
    base = baseline(6)
    records = (series('mocov2', base, protocol='knn', settings=dict(knn, k=20))
               + series('mocov2', {s: v + 5 for s, v in base.items()}, protocol='knn',
                        settings=dict(knn, k=200))
               + series('mixco', shifted(base, [6.0] * 6), protocol='knn',
                        settings=dict(knn, k=200))
               + series('mixco', shifted(base, [0.5] * 6), protocol='knn',
                        settings=dict(knn, k=20))
               + series('mixco', base, protocol='knn', settings=dict(knn, k=50)))
    rows = build_rows(records)
    by_k = {r['protocol_settings'].split(',')[0]: r for r in rows if r['method'] == 'mixco'}
    wide, narrow, lone = by_k['k=200'], by_k['k=20'], by_k['k=50']
    assert wide['compare']['baseline_label'] == f'{MOCO} · k=200'
    assert wide['compare']['paired']['delta'] == pytest.approx(1.0)
    assert narrow['compare']['baseline_label'] == f'{MOCO} · k=20'
    assert narrow['compare']['paired']['delta'] == pytest.approx(0.5)
    assert lone['compare'] is None  # no MoCo-v2 row evaluated with k=50
