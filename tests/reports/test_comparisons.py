"""Leaderboard rows and their comparisons: one row per exact configuration (labels tell them
apart), a repeated seed counted once, older records grouped as before, every statistic of a row
against numpy / scipy / brute-force enumeration of sign patterns, Holm per family, the baseline
chosen, ours minus the paper."""
import csv
import io

import numpy as np
import pytest

from benchmark.layout import PAPER_RESULTS
from benchmark.reports.comparisons import (SUITE, StatsPolicy, choose_baseline, config_family,
                                          main_metric)
from benchmark.reports.leaderboard import LEGACY_MARK, LEGACY_NOTE, build_rows
from benchmark.reports.records import build_record
from benchmark.reports.render import read_paper
from benchmark.reports.tables import render_csv, render_markdown
from tests.reports.references import clopper_pearson, inverted, naive_holm, sign_ps

pytestmark = pytest.mark.usefixtures('quick_provenance')

TAU = {'model.mix_temperature': 0.1}
# Rows show a method by its label in benchmark/names.py METHODS.
MIXCO, MOCO = 'MixCo (MoCo-v2)', 'MoCo-v2'
MIXCO_TAU = f'{MIXCO} [model.mix_temperature=0.1]'


def rec(method, seed, value, *, setting='', overrides=None, config=None, world_size=2,
        protocol='linear_paper', eval_data='tiny-imagenet', status='ok', created=None,
        epochs=100, legacy=False, variant=''):
    """A record of `method`; its setting text is `setting` or, by default, names the method,
    config and overrides (so equal arguments give equal settings). `legacy`: no setting, the
    old suite `variant` label instead."""
    config = config or f'{method}_r18_tiny.py'
    metric = main_metric(protocol)[0]
    metrics = {metric: value} if protocol_is_accuracy(protocol) else dict(
        davies_bouldin=value, calinski_harabasz=10.0, kmeans_nmi=0.5, kmeans_ari=0.25)
    setting_kwargs = {} if legacy else dict(
        setting_text=setting or f'{method} {config} {sorted((overrides or {}).items())}',
        overrides=overrides)
    record = build_record(method=method, backbone='resnet18', pretrain_data='tiny-imagenet',
                          pretrain_epochs=epochs, eval_data=eval_data, seed=seed,
                          world_size=world_size, total_batch=128, time_s_per_epoch=10.0,
                          peak_memory_gb=2.0, status=status, config=config,
                          protocols={protocol: {'settings': {}, 'metrics': metrics}},
                          **setting_kwargs)
    if created is not None:
        record['created'] = created
    return dict(record, variant=variant) if legacy else record


def protocol_is_accuracy(protocol):
    return main_metric(protocol)[0] == 'top1'


def series(method, values, **kwargs):
    """One record per seed from {seed: value}."""
    return [rec(method, seed, value, **kwargs) for seed, value in values.items()]


def ours(rows, **match):
    found = [r for r in rows if r['source'] == SUITE and all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, [r['label'] for r in found])
    return found[0]


def md_tables(text):
    """Each Markdown table as (header, rows of cells)."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith('| ') and current is None:
            current = [[c.strip() for c in line.strip('|').split(' | ')], []]
            tables.append(current)
        elif line.startswith('| '):
            current[1].append([c.strip() for c in line.strip('|').split(' | ')])
        elif not line.startswith('|---'):
            current = None
    return tables


def cell(text, label, column, eval_data='tiny-imagenet'):
    """The cell of `column` in the table row of `label` (first table that has it)."""
    for header, body in md_tables(text):
        for row in body:
            if row[header.index('method')] == label and row[0] == eval_data:
                return row[header.index(column)] if column in header else None
    raise AssertionError(f'no row {label!r}')


# One row per exact configuration, labels that tell them apart

def test_two_settings_of_one_method_never_share_a_row():
    rows = build_rows(series('mixco', {0: 40.0, 1: 42.0})
                      + series('mixco', {0: 50.0, 1: 53.0, 2: 51.0}, overrides=TAU))
    plain = ours(rows, label=MIXCO)
    tau = ours(rows, label=MIXCO_TAU)
    assert plain['setting'] != tau['setting'] and tau['overrides'] == TAU
    assert (plain['metrics']['top1']['n'], plain['metrics']['top1']['mean']) == (2, 41.0)
    assert (tau['metrics']['top1']['n'], tau['metrics']['top1']['mean']) == (3, pytest.approx(154 / 3))
    text = render_markdown(rows, 'now')
    assert cell(text, MIXCO, 'top1') == '41.00 ± 1.41 (n=2)'
    assert cell(text, MIXCO_TAU, 'top1') == '51.33 ± 1.53 (n=3)'


def test_plain_and_fast_config_files_are_separate_rows_named_by_their_file():
    rows = build_rows(series('mixco', {0: 40.0, 1: 41.0}, config='mixco_r18_tiny.py')
                      + series('mixco', {0: 44.0, 1: 46.0}, config='mixco_r18_tiny_fast.py')
                      + series('mocov2', {0: 38.0, 1: 39.0}))
    labels = sorted(r['label'] for r in rows)
    assert labels == [f'{MIXCO} · mixco_r18_tiny', f'{MIXCO} · mixco_r18_tiny_fast', MOCO]
    assert ours(rows, label=f'{MIXCO} · mixco_r18_tiny_fast')['metrics']['top1']['mean'] == 45.0
    assert config_family(ours(rows, label=f'{MIXCO} · mixco_r18_tiny_fast')) == 'r18_tiny_fast'


def test_process_counts_are_separate_rows_named_by_their_count():
    same_text = 'one config text'
    rows = build_rows(series('mixco', {0: 40.0}, setting=same_text, world_size=2)
                      + series('mixco', {0: 44.0}, setting=same_text, world_size=4))
    assert sorted(r['label'] for r in rows) == [f'{MIXCO} · 2 proc', f'{MIXCO} · 4 proc']
    assert ours(rows, label=f'{MIXCO} · 4 proc')['metrics']['top1']['mean'] == 44.0


def test_key_batch_norm_regimes_are_separate_rows_and_each_row_states_its_regime():
    """One process before and after the shuffle-BN emulation: the same setting hash, but the
    records state different key-encoder BatchNorm regimes (or none, written before)."""
    same_text = 'one config text'
    split = 'split into 2 groups (one process)'
    before = series('mocov2', {0: 40.0, 1: 41.0}, setting=same_text, world_size=1)
    after = [dict(r, extra=dict(r['extra'], key_bn=split))
             for r in series('mocov2', {0: 44.0, 1: 46.0}, setting=same_text, world_size=1)]
    rows = build_rows(before + after)
    assert sorted(r['label'] for r in rows) == [
        f'{MOCO} · key BN: not recorded', f'{MOCO} · key BN: {split}']
    emulated = ours(rows, label=f'{MOCO} · key BN: {split}')
    assert emulated['metrics']['top1']['mean'] == 45.0 and emulated['metrics']['top1']['n'] == 2
    assert f'key BN: {split}' in emulated['note']
    alone = build_rows(after)  # a lone regime: the label stays short, the note still says it
    assert ours(alone, method='mocov2')['label'] == MOCO
    assert f'key BN: {split}' in cell(render_markdown(alone, 'now'), MOCO, 'note')


def test_settings_that_read_alike_each_get_their_hash():
    rows = build_rows([rec('mixco', 0, 40.0, setting='text one'),
                       rec('mixco', 0, 41.0, setting='text two'),
                       rec('mixco', 0, 42.0, setting='text three')])
    labels = [r['label'] for r in rows]
    assert len(set(labels)) == 3, labels
    for row in rows:
        assert row['label'] == f"{MIXCO} #{row['setting'][:6]}"
    text = render_markdown(rows, 'now')
    for row in rows:
        assert cell(text, row['label'], 'top1') == f"{row['metrics']['top1']['mean']:.2f} (n=1)"


def test_a_rows_overrides_show_even_when_it_is_the_only_row():
    rows = build_rows(series('mixco', {0: 40.0, 1: 41.0}, overrides=TAU), read_paper(PAPER_RESULTS))
    row = ours(rows, eval_data='tiny-imagenet')
    assert row['label'] == MIXCO_TAU
    assert row['paper_gap'] is None  # not the paper's config
    # Overrides every row of ours shares are said once above the tables, not in each label.
    shared = {'train_cfg.max_epochs': 5}
    rows = build_rows(series('mocov2', {0: 38.0}, overrides=shared)
                      + series('mixco', {0: 40.0}, overrides=dict(shared, **TAU)))
    assert sorted(r['label'] for r in rows) == [MIXCO_TAU, MOCO]
    assert ('Every row of ours here departs from its shipped config in: '
            '`train_cfg.max_epochs=5`.') in render_markdown(rows, 'now')


# A repeated seed is one sample; older records group as before

def test_a_repeated_seed_is_one_sample_and_the_newest_record_counts():
    old = rec('mixco', 0, 10.0, created='2026-01-01T00:00:00+00:00')
    new = rec('mixco', 0, 20.0, created='2026-01-03T00:00:00+00:00')
    other = rec('mixco', 1, 30.0, created='2026-01-02T00:00:00+00:00')
    for order in ([old, new, other], [new, other, old]):
        row = ours(build_rows(order))
        top1 = row['metrics']['top1']
        assert (top1['n'], top1['mean']) == (2, 25.0)
        assert top1['std'] == pytest.approx(np.std([20.0, 30.0], ddof=1))
        assert row['seeds'] == [0, 1] and row['by_seed'] == {0: 20.0, 1: 30.0}
        assert row['superseded'] == [f"seed 0 recorded again ({old['id']}, superseded by "
                                     f"{new['id']})"]
        assert old['id'] in row['note'] and '1 superseded record(s)' in row['note']
    text = render_markdown(build_rows([old, new, other]), 'now')
    assert cell(text, MIXCO, 'top1') == '25.00 ± 7.07 (n=2)'
    assert old['id'] in cell(text, MIXCO, 'note')


def test_each_setting_keeps_its_own_seeds():
    rows = build_rows(series('mixco', {0: 40.0, 1: 42.0}) + series('mixco', {0: 50.0},
                                                                  overrides=TAU))
    plain, tau = ours(rows, label=MIXCO), ours(rows, label=MIXCO_TAU)
    assert (plain['seeds'], tau['seeds']) == ([0, 1], [0])
    assert plain['superseded'] == tau['superseded'] == [] and plain['note'] == tau['note'] == ''


def test_legacy_records_group_as_before_all_counted_and_marked():
    records = [rec('mixco', 0, 10.0, legacy=True), rec('mixco', 0, 20.0, legacy=True),
               rec('mixco', 1, 30.0, legacy=True), rec('mixco', 0, 5.0, legacy=True, variant='x=1')]
    rows = build_rows(records)
    row = ours(rows, variant='')
    assert row['label'] == f'{MIXCO} {LEGACY_MARK}' and row['legacy'] and row['setting'] is None
    assert (row['metrics']['top1']['n'], row['metrics']['top1']['mean']) == (3, 20.0)
    assert row['seeds'] == [0, 0, 1] and row['superseded'] == []
    assert ours(rows, variant='x=1')['label'] == f'{MIXCO} [x=1] {LEGACY_MARK}'
    text = render_markdown(rows, 'now')
    assert LEGACY_NOTE in text and cell(text, f'{MIXCO} {LEGACY_MARK}', 'top1') == \
        '20.00 ± 10.00 (n=3)'
    assert LEGACY_NOTE not in render_markdown(build_rows(series('mixco', {0: 1.0})), 'now')


# Every statistic of a row against an independent reference


def level_text(level):
    return f'{100 * level:.3g}%'


FIXED = ({0: 40.1, 1: 41.3, 2: 39.8, 3: 40.6}, {0: 43.0, 1: 44.9, 2: 42.1, 3: 44.4})


def random_pair(seed, n):
    rng = np.random.default_rng(seed)
    base = {s: float(v) for s, v in enumerate(rng.normal(40, 1.5, n))}
    mixco = {s: float(v) for s, v in enumerate(rng.normal(41, 1.5, n))}
    return base, mixco


@pytest.mark.parametrize('data', [FIXED] + [random_pair(seed, n) for seed, n in
                                            ((0, 3), (1, 5), (2, 6), (3, 9))])
def test_row_and_paired_statistics_match_brute_force_and_scipy(data):
    """Rows: mean and std (numpy), the sign-flip interval by brute-force inversion from 5 seeds
    (min_seeds), the range under. Pairs: the differences, the test over every sign pattern, the
    interval, wins with scipy's exact binomial interval; nothing of that under 5 paired seeds."""
    base, mixco = data
    # A seed only one side has counts in that row's mean but not in the paired statistics.
    rows = build_rows(series('mocov2', {**base, 100: 30.0})
                      + series('mixco', {**mixco, 200: 60.0}))
    row, base_row = ours(rows, method='mixco'), ours(rows, method='mocov2')
    text = render_markdown(rows, 'now')
    parsed = {r['method']: r for r in csv.DictReader(io.StringIO(render_csv(rows)))}
    for got, values in ((row, list(mixco.values()) + [60.0]),
                        (base_row, list(base.values()) + [30.0])):
        x = np.asarray(values)
        top1 = got['metrics']['top1']
        assert top1['n'] == len(values)
        assert top1['mean'] == pytest.approx(x.mean(), abs=1e-12)
        assert top1['std'] == pytest.approx(x.std(ddof=1), abs=1e-12)
        assert top1['range'] == (x.min(), x.max())
        column = cell(text, got['label'], 'top1 interval')
        if len(values) >= 5:
            low, high, level = inverted(values)
            assert top1['ci'] == pytest.approx((low, high), abs=1e-8)
            assert top1['ci_level'] == pytest.approx(level)
            assert level >= 0.95 or len(values) == 5  # 5 seeds: the range, at 93.75%
            shown = '' if abs(level - 0.95) < 5e-4 else f' ({level_text(level)})'
            assert column == f'[{low:.2f}, {high:.2f}]{shown}'
            assert float(parsed[got['method']]['ci_low']) == pytest.approx(low, abs=1e-8)
        else:
            assert column == f'range [{x.min():.2f}, {x.max():.2f}]'
            assert parsed[got['method']]['ci_low'] == ''
            assert float(parsed[got['method']]['range_high']) == x.max()
    compare = row['compare']
    assert compare['baseline'] == 'mocov2'
    assert compare['delta'] == pytest.approx(row['metrics']['top1']['mean']
                                             - base_row['metrics']['top1']['mean'], abs=1e-9)
    shared = sorted(set(base) & set(mixco))
    d = np.array([mixco[s] - base[s] for s in shared])
    paired = compare['paired']
    assert paired['seeds'] == shared and paired['n'] == len(shared)
    assert paired['diffs'] == pytest.approx(list(d), abs=1e-12)
    assert paired['delta'] == pytest.approx(d.mean(), abs=1e-12)
    assert paired['std'] == pytest.approx(d.std(ddof=1), abs=1e-12)
    assert compare['left_out'] == [f'seed 200: only {MIXCO} has it',
                                   f'seed 100: only {MOCO} has it']
    assert (compare['family'], compare['family_size']) == ('primary', 1)
    delta_cell = cell(text, MIXCO, 'Δ top1 vs baseline, interval (higher is better)')
    if len(shared) < 5:
        assert paired['p'] is None and paired['ci'] is None and paired['wins'] is None
        assert compare['p_holm'] is None and compare['verdict'] == 'too few seeds'
        per_seed = ', '.join(f'{v:+.2f}' for v in d)
        assert delta_cell == (f'{d.mean():+.2f} vs {MOCO} ({len(shared)} paired seeds); '
                              f'per seed {per_seed}')
        assert cell(text, MIXCO, 'sign-flip test') == \
            f'n={len(shared)} < 5: no test; a verdict needs 6 seeds'
        assert cell(text, MIXCO, 'P(better), 95% CI') == ''
        assert parsed['mixco']['p_signflip'] == parsed['mixco']['paired_ci_low'] == ''
        return
    p = sign_ps(d, [0.0])[0]
    assert paired['p'] == pytest.approx(p, abs=1e-12)
    assert paired['p_floor'] == 2 / 2 ** len(shared) <= paired['p']
    assert compare['p_holm'] == pytest.approx(p)  # the family's only test
    assert compare['level'] == 0.05  # Holm's level for a family of one
    if 2 / 2 ** len(d) > 0.05:  # 5 paired seeds cannot reach 0.05: no Δ interval
        assert paired['ci'] is None and paired['ci_level'] is None
    else:
        low, high, level = inverted(d, 0.05)
        assert paired['ci'] == pytest.approx((low, high), abs=1e-8)
        assert paired['ci_level'] == pytest.approx(level)
    won, tied = int(np.sum(d > 0)), int(np.sum(d == 0))
    assert (paired['wins']['wins'], paired['wins']['ties']) == (won, tied)
    assert paired['wins']['share'] == pytest.approx((won + tied / 2) / len(d))
    assert paired['wins']['ci'] == pytest.approx(
        (clopper_pearson(won, len(d))[0], clopper_pearson(won + tied, len(d))[1]), abs=1e-9)
    assert compare['verdict'] == ('better' if p <= 0.05 and d.mean() > 0 else
                                  'worse' if p <= 0.05 else 'undecided')
    assert cell(text, MIXCO, 'sign-flip test') == f'p {p:.2g}, Holm {p:.2g}'
    if paired['ci'] is None:
        per_seed = ', '.join(f'{v:+.2f}' for v in d)
        assert delta_cell.startswith(f'{d.mean():+.2f} vs {MOCO} ({len(shared)} paired seeds); '
                                     f'per seed {per_seed}')
        assert parsed['mixco']['paired_ci_low'] == ''
    else:
        assert delta_cell == (f'{d.mean():+.2f} [{low:+.2f}, {high:+.2f}] '
                              f'({level_text(level)}) vs {MOCO} ({len(shared)} paired seeds)')
        assert float(parsed['mixco']['paired_ci_low']) == pytest.approx(low, abs=1e-8)
    assert cell(text, MIXCO, 'verdict (family, size)') == f"{compare['verdict']} (primary, 1)"
    assert float(parsed['mixco']['p_signflip']) == pytest.approx(p)
    assert float(parsed['mixco']['p_improve_low']) == pytest.approx(
        clopper_pearson(won, len(d))[0], abs=1e-9)


def test_holm_adjusts_the_p_values_of_each_family_apart():
    """Primary: each method as run against its baseline by the headline protocols on the
    pretraining data; exploratory: the rest of the section (transfer data, cluster indices,
    variants); another section is judged on its own."""
    rng = np.random.default_rng(11)

    def pair(method, shift, **kw):
        return (series('mocov2', {s: float(v) for s, v in enumerate(rng.normal(40, 1, 8))}, **kw)
                + series(method, {s: float(v) for s, v in
                                  enumerate(rng.normal(40 + shift, 1, 8))}, **kw))
    base = {s: 40.0 + 0.1 * s for s in range(8)}
    records = (pair('mixco', 1.5) + pair('mixco', 0.5, eval_data='cifar10')
               + pair('mixco', 2.0, protocol='knn')
               + series('imix', {s: 41.0 + s * 0.7 + (s % 2) for s in range(8)})
               + pair('mixco', -0.3, protocol='cluster')             # the cluster table
               + series('mixco', {s: v + 1 for s, v in base.items()}, overrides=TAU)
               + pair('mixco', 1.0, epochs=200))                     # another section
    rows = build_rows(records)
    section = [r for r in rows if r['source'] == SUITE and r['compare']
               and r['compare']['paired'] and r['pretrain_epochs'] == 100]
    families = {name: [r for r in section if r['compare']['family'] == name]
                for name in ('primary', 'exploratory')}
    assert sorted((r['method'], r['protocol']) for r in families['primary']) == [
        ('imix', 'linear_paper'), ('mixco', 'knn'), ('mixco', 'linear_paper')]
    assert sorted((r['label'], r['eval_data'], r['protocol'])
                  for r in families['exploratory']) == [
        (MIXCO, 'cifar10', 'linear_paper'), (MIXCO, 'tiny-imagenet', 'cluster'),
        (MIXCO_TAU, 'tiny-imagenet', 'linear_paper')]
    for members in families.values():
        p = [r['compare']['paired']['p'] for r in members]
        assert p == pytest.approx([sign_ps(r['compare']['paired']['diffs'], [0.0])[0]
                                   for r in members], abs=1e-12)
        assert [r['compare']['p_holm'] for r in members] == pytest.approx(naive_holm(p),
                                                                          abs=1e-15)
        assert naive_holm(p) != pytest.approx(p)  # the adjustment did something
        assert {r['compare']['family_size'] for r in members} == {3}
    alone = ours(rows, method='mixco', pretrain_epochs=200)
    assert alone['compare']['p_holm'] == pytest.approx(alone['compare']['paired']['p'])
    assert (alone['compare']['family'], alone['compare']['family_size']) == ('primary', 1)
    text = render_markdown(rows, 'now')
    imix = ours(rows, method='imix')
    assert cell(text, 'i-Mix (MoCo-v2)', 'sign-flip test') == (
        f"p {imix['compare']['paired']['p']:.2g}, Holm {imix['compare']['p_holm']:.2g}")
    assert cell(text, 'i-Mix (MoCo-v2)', 'verdict (family, size)') == \
        f"{imix['compare']['verdict']} (primary, 3)"


def fewest_seeds(alpha):
    """The fewest seeds whose two-sided sign-flip test can reach alpha: 2/2^n <= alpha."""
    return next(n for n in range(1, 64) if 2 / 2 ** n <= alpha)


@pytest.mark.parametrize('mixco', [{0: 42.0, 1: 44.5}, {0: 43.1, 1: 41.2}, {0: 41.0, 1: 40.0},
                                   {0: 42.0, 1: 43.0, 2: 41.0, 3: 42.5}])
def test_fewer_than_min_seeds_give_no_test_but_the_seeds_a_verdict_needs(mixco):
    base = {0: 40.0, 1: 41.0, 2: 39.0, 3: 40.5}
    rows = build_rows(series('mocov2', base) + series('mixco', mixco))
    compare = ours(rows, method='mixco')['compare']
    paired = compare['paired']
    n = len(mixco)
    assert paired['n'] == n and not paired['enough'] and paired['min_seeds'] == 5
    assert paired['diffs'] == pytest.approx([mixco[s] - base[s] for s in sorted(mixco)])
    assert paired['p'] is None and paired['ci'] is None and paired['wins'] is None
    assert compare['p_holm'] is None and compare['verdict'] == 'too few seeds'
    need = max(5, fewest_seeds(0.05))
    assert compare['plan']['seeds_for_verdict'] == need == 6
    assert cell(render_markdown(rows, 'now'), MIXCO, 'sign-flip test') == \
        f'n={n} < 5: no test; a verdict needs {need} seeds'
    # two such comparisons in one family: each needs the seeds to reach 0.05 / 2
    rows = build_rows(series('mocov2', base) + series('mixco', mixco) + series('imix', mixco))
    assert ours(rows, method='imix')['compare']['plan']['seeds_for_verdict'] == \
        fewest_seeds(0.025) == 7


def test_one_paired_seed_says_why_there_is_no_test():
    rows = build_rows(series('mocov2', {0: 40.0}) + series('mixco', {0: 42.0}))
    text = render_markdown(rows, 'now')
    assert cell(text, MIXCO, 'sign-flip test') == 'n=1 < 5: no test; a verdict needs 6 seeds'
    assert cell(text, MIXCO, 'Δ top1 vs baseline, interval (higher is better)') == \
        f'+2.00 vs {MOCO} (1 paired seed); per seed +2.00'
    assert cell(text, MIXCO, 'top1 interval') == ''  # one value: no range to show


def test_a_suites_min_seeds_decides_when_intervals_and_tests_appear():
    base = {s: 40.0 + 0.3 * s for s in range(3)}
    records = series('mocov2', base) + series('mixco', {s: v + 1.0 for s, v in base.items()})
    rows = build_rows(records, policy=StatsPolicy(min_seeds=3))
    compare = ours(rows, method='mixco')['compare']
    assert compare['paired']['p'] == sign_ps([1.0, 1.0, 1.0], [0.0])[0] == 0.25
    assert compare['verdict'] == 'undecided'  # 3 seeds cannot reach 0.05
    low, high, level = inverted(list(base.values()))
    assert cell(render_markdown(rows, 'now'), MOCO, 'top1 interval') == \
        f'[{low:.2f}, {high:.2f}] ({level_text(level)})'
    assert level == 0.75


# The baseline

def base_of(rows, **match):
    compare = ours(rows, **match)['compare']
    return compare and compare['baseline_label']


def test_a_variant_is_compared_with_the_baseline_of_the_same_overrides_else_the_plain_one():
    other = {'model.queue_size': 1024}
    records = (series('mocov2', {0: 40.0}) + series('mocov2', {0: 30.0}, overrides=TAU)
               + series('mixco', {0: 44.0}) + series('mixco', {0: 35.0}, overrides=TAU)
               + series('mixco', {0: 33.0}, overrides=other))
    rows = build_rows(records)
    mocov2_tau = ours(rows, method='mocov2', overrides=TAU)['label']
    assert base_of(rows, method='mixco', overrides=TAU) == mocov2_tau
    assert ours(rows, method='mixco', overrides=TAU)['compare']['delta'] == pytest.approx(5.0)
    plain = ours(rows, method='mocov2', overrides={})['label']
    assert base_of(rows, method='mixco', overrides=other) == plain
    assert base_of(rows, method='mixco', overrides={}) == plain


def test_a_baseline_with_an_override_the_method_lacks_is_not_preferred():
    rows = build_rows(series('mocov2', {0: 30.0}, overrides={'model.queue_size': 1024})
                      + series('mocov2', {0: 40.0}) + series('mixco', {0: 44.0}))
    assert base_of(rows, method='mixco') == MOCO
    assert ours(rows, method='mixco')['compare']['delta'] == pytest.approx(4.0)
    # choose_baseline itself, whatever the order of the candidates
    mixco = ours(rows, method='mixco')
    candidates = [r for r in rows if r['method'] == 'mocov2']
    for order in (candidates, candidates[::-1]):
        assert choose_baseline(mixco, order)['overrides'] == {}


def test_rows_that_are_not_ok_never_serve_as_baselines():
    rows = build_rows(series('mocov2', {0: 40.0}, status='diverged')
                      + series('mocov2', {0: 30.0}, overrides={'model.queue_size': 1024})
                      + series('mixco', {0: 44.0}) + series('mixco', {1: 44.0}, status='failed'))
    assert base_of(rows, method='mixco', status='ok') == f'{MOCO} [model.queue_size=1024]'
    assert ours(rows, method='mixco', status='failed')['compare'] is None
    rows = build_rows(series('mocov2', {0: 40.0}, status='diverged') + series('mixco', {0: 44.0}))
    assert ours(rows, method='mixco')['compare'] is None


def test_older_records_are_compared_with_older_records_and_new_with_new():
    rows = build_rows(series('mocov2', {0: 40.0}, legacy=True) + series('mocov2', {0: 30.0})
                      + series('mixco', {0: 44.0}, legacy=True) + series('mixco', {0: 35.0}))
    assert base_of(rows, method='mixco', legacy=True) == f'{MOCO} {LEGACY_MARK}'
    assert ours(rows, method='mixco', legacy=True)['compare']['delta'] == pytest.approx(4.0)
    assert base_of(rows, method='mixco', legacy=False) == MOCO
    assert ours(rows, method='mixco', legacy=False)['compare']['delta'] == pytest.approx(5.0)
    # where only the other kind is there, it serves
    rows = build_rows(series('mocov2', {0: 40.0}, legacy=True) + series('mixco', {0: 35.0}))
    assert base_of(rows, method='mixco') == f'{MOCO} {LEGACY_MARK}'


# Ours minus the paper

def test_a_shipped_config_meets_the_papers_row_and_a_variant_does_not():
    paper = read_paper(PAPER_RESULTS)
    rows = build_rows(series('mixco', {0: 40.0, 1: 41.0}) + series('mixco', {0: 50.0},
                                                                  overrides=TAU), paper)
    mine = ours(rows, label=MIXCO, eval_data='tiny-imagenet')
    assert mine['paper_gap']['delta'] == pytest.approx(40.5 - 42.65)
    assert mine['paper_gap']['paper'] == '42.65'
    assert ours(rows, label=MIXCO_TAU)['paper_gap'] is None
    parsed = [r for r in csv.DictReader(io.StringIO(render_csv(rows))) if r['source'] == SUITE]
    by_label = {r['method_label']: r for r in parsed}
    assert float(by_label[MIXCO]['paper_delta']) == pytest.approx(-2.15)
    assert by_label[MIXCO]['paper_value'] == '42.65'
    assert by_label[MIXCO_TAU]['paper_delta'] == ''
    assert by_label[MIXCO_TAU]['paper_value'] == ''
    assert cell(render_markdown(rows, 'now'), MIXCO, 'ours − paper (top1)') == \
        '-2.15 vs 42.65 (linear (paper protocol), paper Table 1, 3, 6)'


def test_a_supervised_record_meets_the_papers_supervised_row():
    rows = build_rows(series('supervised', {0: 60.0, 1: 61.0}, protocol='supervised'),
                      read_paper(PAPER_RESULTS))
    gap = ours(rows, method='supervised')['paper_gap']
    assert gap['delta'] == pytest.approx(60.5 - 63.96) and gap['paper'] == '63.96'
    assert gap['protocol'] == 'supervised'
