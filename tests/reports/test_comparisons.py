"""Leaderboard rows and their comparisons: one row per exact configuration (labels tell them
apart), a repeated seed counted once, older records grouped as before, every statistic of a row
against numpy / scipy / a naive loop, Holm per table, the baseline chosen, ours minus the
paper."""
import csv
import io
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from benchmark.layout import PAPER_RESULTS
from benchmark.reports.comparisons import SUITE, choose_baseline, config_family, main_metric
from benchmark.reports.leaderboard import LEGACY_MARK, LEGACY_NOTE, build_rows
from benchmark.reports.records import build_record
from benchmark.reports.render import read_paper
from benchmark.reports.tables import render_csv, render_markdown

TAU = {'model.mix_temperature': 0.1}


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
    plain = ours(rows, label='mixco')
    tau = ours(rows, label='mixco [model.mix_temperature=0.1]')
    assert plain['setting'] != tau['setting'] and tau['overrides'] == TAU
    assert (plain['metrics']['top1']['n'], plain['metrics']['top1']['mean']) == (2, 41.0)
    assert (tau['metrics']['top1']['n'], tau['metrics']['top1']['mean']) == (3, pytest.approx(154 / 3))
    text = render_markdown(rows, 'now')
    assert cell(text, 'mixco', 'top1') == '41.00 ± 1.41 (n=2)'
    assert cell(text, 'mixco [model.mix_temperature=0.1]', 'top1') == '51.33 ± 1.53 (n=3)'


def test_plain_and_fast_config_files_are_separate_rows_named_by_their_file():
    rows = build_rows(series('mixco', {0: 40.0, 1: 41.0}, config='mixco_r18_tiny.py')
                      + series('mixco', {0: 44.0, 1: 46.0}, config='mixco_r18_tiny_fast.py')
                      + series('mocov2', {0: 38.0, 1: 39.0}))
    labels = sorted(r['label'] for r in rows)
    assert labels == ['mixco · mixco_r18_tiny', 'mixco · mixco_r18_tiny_fast', 'mocov2']
    assert ours(rows, label='mixco · mixco_r18_tiny_fast')['metrics']['top1']['mean'] == 45.0
    assert config_family(ours(rows, label='mixco · mixco_r18_tiny_fast')) == 'r18_tiny_fast'


def test_process_counts_are_separate_rows_named_by_their_count():
    same_text = 'one config text'
    rows = build_rows(series('mixco', {0: 40.0}, setting=same_text, world_size=2)
                      + series('mixco', {0: 44.0}, setting=same_text, world_size=4))
    assert sorted(r['label'] for r in rows) == ['mixco · 2 proc', 'mixco · 4 proc']
    assert ours(rows, label='mixco · 4 proc')['metrics']['top1']['mean'] == 44.0


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
        'mocov2 · key BN: not recorded', f'mocov2 · key BN: {split}']
    emulated = ours(rows, label=f'mocov2 · key BN: {split}')
    assert emulated['metrics']['top1']['mean'] == 45.0 and emulated['metrics']['top1']['n'] == 2
    assert f'key BN: {split}' in emulated['note']
    alone = build_rows(after)  # a lone regime: the label stays short, the note still says it
    assert ours(alone, method='mocov2')['label'] == 'mocov2'
    assert f'key BN: {split}' in cell(render_markdown(alone, 'now'), 'mocov2', 'note')


def test_settings_that_read_alike_each_get_their_hash():
    rows = build_rows([rec('mixco', 0, 40.0, setting='text one'),
                       rec('mixco', 0, 41.0, setting='text two'),
                       rec('mixco', 0, 42.0, setting='text three')])
    labels = [r['label'] for r in rows]
    assert len(set(labels)) == 3, labels
    for row in rows:
        assert row['label'] == f"mixco #{row['setting'][:6]}"
    text = render_markdown(rows, 'now')
    for row in rows:
        assert cell(text, row['label'], 'top1') == f"{row['metrics']['top1']['mean']:.2f} (n=1)"


def test_a_rows_overrides_show_even_when_it_is_the_only_row():
    rows = build_rows(series('mixco', {0: 40.0, 1: 41.0}, overrides=TAU), read_paper(PAPER_RESULTS))
    row = ours(rows, eval_data='tiny-imagenet')
    assert row['label'] == 'mixco [model.mix_temperature=0.1]'
    assert row['paper_gap'] is None  # not the paper's config
    # Overrides every row of ours shares are said once above the tables, not in each label.
    shared = {'train_cfg.max_epochs': 5}
    rows = build_rows(series('mocov2', {0: 38.0}, overrides=shared)
                      + series('mixco', {0: 40.0}, overrides=dict(shared, **TAU)))
    assert sorted(r['label'] for r in rows) == ['mixco [model.mix_temperature=0.1]', 'mocov2']
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
    assert cell(text, 'mixco', 'top1') == '25.00 ± 7.07 (n=2)'
    assert old['id'] in cell(text, 'mixco', 'note')


def test_each_setting_keeps_its_own_seeds():
    rows = build_rows(series('mixco', {0: 40.0, 1: 42.0}) + series('mixco', {0: 50.0},
                                                                  overrides=TAU))
    plain, tau = ours(rows, label='mixco'), ours(rows, label='mixco [model.mix_temperature=0.1]')
    assert (plain['seeds'], tau['seeds']) == ([0, 1], [0])
    assert plain['superseded'] == tau['superseded'] == [] and plain['note'] == tau['note'] == ''


def test_legacy_records_group_as_before_all_counted_and_marked():
    records = [rec('mixco', 0, 10.0, legacy=True), rec('mixco', 0, 20.0, legacy=True),
               rec('mixco', 1, 30.0, legacy=True), rec('mixco', 0, 5.0, legacy=True, variant='x=1')]
    rows = build_rows(records)
    row = ours(rows, variant='')
    assert row['label'] == f'mixco {LEGACY_MARK}' and row['legacy'] and row['setting'] is None
    assert (row['metrics']['top1']['n'], row['metrics']['top1']['mean']) == (3, 20.0)
    assert row['seeds'] == [0, 0, 1] and row['superseded'] == []
    assert ours(rows, variant='x=1')['label'] == f'mixco [x=1] {LEGACY_MARK}'
    text = render_markdown(rows, 'now')
    assert LEGACY_NOTE in text and cell(text, f'mixco {LEGACY_MARK}', 'top1') == \
        '20.00 ± 10.00 (n=3)'
    assert LEGACY_NOTE not in render_markdown(build_rows(series('mixco', {0: 1.0})), 'now')


# Every statistic of a row against an independent reference

def t_reference(values):
    x = np.asarray(values, np.float64)
    half = sps.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return x.mean(), x.std(ddof=1), (x.mean() - half, x.mean() + half)


def naive_improvement(a, b):
    wins = 0.0
    for x, y in itertools.product(a, b):
        wins += 1.0 if x > y else 0.5 if x == y else 0.0
    return wins / (len(a) * len(b))


FIXED = ({0: 40.1, 1: 41.3, 2: 39.8, 3: 40.6}, {0: 43.0, 1: 44.9, 2: 42.1, 3: 44.4})


def random_pair(seed, n):
    rng = np.random.default_rng(seed)
    base = {s: float(v) for s, v in enumerate(rng.normal(40, 1.5, n))}
    mixco = {s: float(v) for s, v in enumerate(rng.normal(41, 1.5, n))}
    return base, mixco


@pytest.mark.parametrize('data', [FIXED] + [random_pair(seed, n) for seed, n in
                                            ((0, 3), (1, 5), (2, 6), (3, 9))])
def test_row_and_paired_statistics_match_numpy_and_scipy(data):
    base, mixco = data
    # A seed only one side has counts in that row's mean but not in the paired statistics.
    rows = build_rows(series('mocov2', {**base, 100: 30.0})
                      + series('mixco', {**mixco, 200: 60.0}))
    row, base_row = ours(rows, method='mixco'), ours(rows, method='mocov2')
    for got, values in ((row, list(mixco.values()) + [60.0]),
                        (base_row, list(base.values()) + [30.0])):
        mean, std, ci = t_reference(values)
        top1 = got['metrics']['top1']
        assert top1['n'] == len(values)
        assert top1['mean'] == pytest.approx(mean, abs=1e-12)
        assert top1['std'] == pytest.approx(std, abs=1e-12)
        assert top1['ci'] == pytest.approx(ci, abs=1e-10)
    compare = row['compare']
    assert compare['baseline'] == 'mocov2'
    assert compare['delta'] == pytest.approx(row['metrics']['top1']['mean']
                                             - base_row['metrics']['top1']['mean'], abs=1e-9)
    shared = sorted(set(base) & set(mixco))
    a = np.array([mixco[s] for s in shared])
    b = np.array([base[s] for s in shared])
    paired = compare['paired']
    assert paired['seeds'] == shared and paired['n'] == len(shared)
    delta, std, ci = t_reference(a - b)
    assert paired['delta'] == pytest.approx(delta, abs=1e-12)
    assert paired['std'] == pytest.approx(std, abs=1e-12)
    assert paired['ci'] == pytest.approx(ci, abs=1e-10)
    assert paired['p_t'] == pytest.approx(sps.ttest_rel(a, b).pvalue, abs=1e-12)
    assert compare['p_holm'] == pytest.approx(paired['p_t'])  # the table's only test
    assert paired['p_improve'] == pytest.approx(naive_improvement(a, b), abs=1e-12)
    assert paired['seeds_needed'] is None
    text = render_markdown(rows, 'now')
    header = md_tables(text)[0][0]
    if len(shared) >= 6:
        assert paired['p_wilcoxon'] == pytest.approx(sps.wilcoxon(a, b).pvalue, abs=1e-12)
        assert 'p_W' in header
        assert cell(text, 'mixco', 'p_W') == f"{sps.wilcoxon(a, b).pvalue:.2g}"
    else:
        assert paired['p_wilcoxon'] is None and 'p_W' not in header
    p = sps.ttest_rel(a, b).pvalue
    assert cell(text, 'mixco', 'paired t-test') == f'p {p:.2g}, Holm {p:.2g}'
    assert cell(text, 'mixco', 'Δ top1 vs baseline, 95% CI (higher is better)') == (
        f'{delta:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}] vs mocov2 ({len(shared)} paired seeds)')
    assert cell(text, 'mixco', 'top1 95% CI') == (
        f"[{row['metrics']['top1']['ci'][0]:.2f}, {row['metrics']['top1']['ci'][1]:.2f}]")
    parsed = {r['method']: r for r in csv.DictReader(io.StringIO(render_csv(rows)))}
    assert float(parsed['mixco']['p_t']) == pytest.approx(p)
    assert float(parsed['mixco']['paired_ci_low']) == pytest.approx(ci[0])
    assert float(parsed['mixco']['ci_low']) == pytest.approx(row['metrics']['top1']['ci'][0])


def naive_holm(pvalues):
    """Holm's adjusted p: for the k-th smallest, the largest min(1, (m - j) p_(j)) over j <= k."""
    m = len(pvalues)
    ranked = sorted(pvalues)
    return [max(min(1.0, (m - j) * ranked[j]) for j in range(ranked.index(p) + 1))
            for p in pvalues]


def test_holm_adjusts_the_p_values_of_each_table_apart():
    rng = np.random.default_rng(11)

    def pair(method, shift, **kw):
        return (series('mocov2', {s: float(v) for s, v in enumerate(rng.normal(40, 1, 4))}, **kw)
                + series(method, {s: float(v) for s, v in
                                  enumerate(rng.normal(40 + shift, 1, 4))}, **kw))
    records = (pair('mixco', 1.5) + pair('mixco', 0.5, eval_data='cifar10')
               + pair('mixco', 2.0, protocol='knn')
               + series('imix', {s: 41.0 + s * 0.7 + (s % 2) for s in range(4)})
               + pair('mixco', -0.3, protocol='cluster')             # the cluster table
               + pair('mixco', 1.0, epochs=200))                     # another section
    rows = build_rows(records)
    compared = [r for r in rows if r['compare'] and r['compare']['paired']]
    accuracy = [r for r in compared if r['pretrain_epochs'] == 100 and r['protocol'] != 'cluster']
    assert len(accuracy) == 4
    p = [r['compare']['paired']['p_t'] for r in accuracy]
    assert [r['compare']['p_holm'] for r in accuracy] == pytest.approx(naive_holm(p), abs=1e-15)
    assert naive_holm(p) != pytest.approx(p)  # the adjustment did something
    for alone in (ours(rows, method='mixco', protocol='cluster'),
                  ours(rows, method='mixco', pretrain_epochs=200)):
        assert alone['compare']['p_holm'] == pytest.approx(alone['compare']['paired']['p_t'])
    text = render_markdown(rows, 'now')
    imix = ours(rows, method='imix')
    assert cell(text, 'imix', 'paired t-test') == (
        f"p {imix['compare']['paired']['p_t']:.2g}, Holm {imix['compare']['p_holm']:.2g}")


def brute_force_seeds(delta, sd):
    for n in range(2, 1001):
        crit = sps.t.ppf(0.975, n - 1)
        nc = delta / (sd / math.sqrt(n))
        if sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc) >= 0.8:
            return n
    return None


@pytest.mark.parametrize('mixco', [{0: 42.0, 1: 44.5}, {0: 43.1, 1: 41.2}, {0: 41.0, 1: 40.0}])
def test_fewer_than_three_paired_seeds_give_no_test_but_the_seeds_needed(mixco):
    base = {0: 40.0, 1: 41.0}
    rows = build_rows(series('mocov2', base) + series('mixco', mixco))
    paired = ours(rows, method='mixco')['compare']['paired']
    diffs = np.array([mixco[s] - base[s] for s in (0, 1)])
    assert paired['n'] == 2 and paired['p_t'] is None and paired['p_wilcoxon'] is None
    assert ours(rows, method='mixco')['compare']['p_holm'] is None
    needed = brute_force_seeds(diffs.mean(), diffs.std(ddof=1)) if diffs.mean() else None
    assert paired['seeds_needed'] == needed
    text = cell(render_markdown(rows, 'now'), 'mixco', 'paired t-test')
    assert text.startswith('n=2 < 3: no test; seeds needed ')
    if needed:
        assert text == f'n=2 < 3: no test; seeds needed ~{needed} for 80% power'
    else:  # Δ = 0: nothing to detect, not "over 1000"
        assert text == 'n=2 < 3: no test; seeds needed no Δ to plan from'


def test_one_paired_seed_says_why_there_is_no_test():
    rows = build_rows(series('mocov2', {0: 40.0}) + series('mixco', {0: 42.0}))
    assert cell(render_markdown(rows, 'now'), 'mixco', 'paired t-test') == \
        'n=1 < 3: no test; seeds needed no spread to plan from'


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
    assert base_of(rows, method='mixco') == 'mocov2'
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
    assert base_of(rows, method='mixco', status='ok') == 'mocov2 [model.queue_size=1024]'
    assert ours(rows, method='mixco', status='failed')['compare'] is None
    rows = build_rows(series('mocov2', {0: 40.0}, status='diverged') + series('mixco', {0: 44.0}))
    assert ours(rows, method='mixco')['compare'] is None


def test_older_records_are_compared_with_older_records_and_new_with_new():
    rows = build_rows(series('mocov2', {0: 40.0}, legacy=True) + series('mocov2', {0: 30.0})
                      + series('mixco', {0: 44.0}, legacy=True) + series('mixco', {0: 35.0}))
    assert base_of(rows, method='mixco', legacy=True) == f'mocov2 {LEGACY_MARK}'
    assert ours(rows, method='mixco', legacy=True)['compare']['delta'] == pytest.approx(4.0)
    assert base_of(rows, method='mixco', legacy=False) == 'mocov2'
    assert ours(rows, method='mixco', legacy=False)['compare']['delta'] == pytest.approx(5.0)
    # where only the other kind is there, it serves
    rows = build_rows(series('mocov2', {0: 40.0}, legacy=True) + series('mixco', {0: 35.0}))
    assert base_of(rows, method='mixco') == f'mocov2 {LEGACY_MARK}'


# Ours minus the paper

def test_a_shipped_config_meets_the_papers_row_and_a_variant_does_not():
    paper = read_paper(PAPER_RESULTS)
    rows = build_rows(series('mixco', {0: 40.0, 1: 41.0}) + series('mixco', {0: 50.0},
                                                                  overrides=TAU), paper)
    mine = ours(rows, label='mixco', eval_data='tiny-imagenet')
    assert mine['paper_gap']['delta'] == pytest.approx(40.5 - 42.65)
    assert mine['paper_gap']['paper'] == '42.65'
    assert ours(rows, label='mixco [model.mix_temperature=0.1]')['paper_gap'] is None
    parsed = [r for r in csv.DictReader(io.StringIO(render_csv(rows))) if r['source'] == SUITE]
    by_label = {r['method_label']: r for r in parsed}
    assert float(by_label['mixco']['paper_delta']) == pytest.approx(-2.15)
    assert by_label['mixco']['paper_value'] == '42.65'
    assert by_label['mixco [model.mix_temperature=0.1]']['paper_delta'] == ''
    assert by_label['mixco [model.mix_temperature=0.1]']['paper_value'] == ''
    assert cell(render_markdown(rows, 'now'), 'mixco', 'ours − paper (top1)') == \
        '-2.15 vs 42.65 (linear (paper protocol), paper Table 1, 3, 6)'


def test_a_supervised_record_meets_the_papers_supervised_row():
    rows = build_rows(series('supervised', {0: 60.0, 1: 61.0}, protocol='supervised'),
                      read_paper(PAPER_RESULTS))
    gap = ours(rows, method='supervised')['paper_gap']
    assert gap['delta'] == pytest.approx(60.5 - 63.96) and gap['paper'] == '63.96'
    assert gap['protocol'] == 'supervised'
