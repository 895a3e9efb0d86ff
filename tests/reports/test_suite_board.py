"""A suite's leaderboard: variants as their own labelled rows, Δ and the paired Δ over seeds
against a hand computation (under min_seeds: the differences and the seeds a verdict needs,
by family), online protocols labelled apart, the paper's rows beside ours only, monitor curves
merged over a resume and summarised over seeds."""
import csv
import io
import json
import statistics

import pytest

from benchmark.reports.leaderboard import build_rows
from benchmark.reports.tables import render_csv, render_markdown
from benchmark.reports.records import build_record
from benchmark.reports.render import read_paper
from benchmark.layout import PAPER_RESULTS
from benchmark.reports.suite_board import (hardware, mean_and_spread, monitor_series,
                                           paper_beside_ours, plot_monitor_curves, suite_markdown)

pytestmark = pytest.mark.usefixtures('quick_provenance')


def rec(method, seed, top1, variant='', protocol='linear_paper', data='tiny-imagenet', status='ok',
        legacy=False):
    """A record; `variant` ('k=v') is its override, or, for `legacy`, the old variant label."""
    overrides = dict(item.split('=') for item in variant.split(', ')) if variant else {}
    overrides = {k: json.loads(v) if v[0].isdigit() else v for k, v in overrides.items()}
    setting = {} if legacy else dict(setting_text=f'{method} {variant}', overrides=overrides)
    record = build_record(method=method, backbone='resnet18', pretrain_data='tiny-imagenet',
                          pretrain_epochs=100, eval_data=data, seed=seed, world_size=2,
                          total_batch=128, time_s_per_epoch=10.0, peak_memory_gb=2.0, status=status,
                          protocols={protocol: {'settings': {}, 'metrics': {'top1': top1}}},
                          config=f'{method}_r18_tiny.py', **setting)
    return dict(record, variant=variant) if legacy else record


def md_rows(text):
    return [[c.strip() for c in line.strip('|').split(' | ')]
            for line in text.splitlines() if line.startswith('| ') and '---' not in line]


MOCO = {0: 40.0, 1: 41.0, 3: 39.0}
MIXCO = {0: 43.0, 1: 45.5, 2: 44.0}
TAU = {0: 42.0, 1: 41.0}
# Rows show a method by its label in benchmark/names.py METHODS.
MIXCO_LABEL, MOCO_LABEL = 'MixCo (MoCo-v2)', 'MoCo-v2'


def records(legacy=False):
    out = [rec('mocov2', s, v, legacy=legacy) for s, v in MOCO.items()]
    out += [rec('mixco', s, v, legacy=legacy) for s, v in MIXCO.items()]
    out += [rec('mixco', s, v, variant='model.mix_temperature=0.2', legacy=legacy)
            for s, v in TAU.items()]
    return out


@pytest.mark.parametrize('legacy', [False, True])
def test_paired_delta_matches_a_hand_computation(legacy):
    """Δ of the means over all seeds; the paired Δ only over the seeds both rows have (0, 1)."""
    rows = {r['label'].rstrip(' †'): r for r in build_rows(records(legacy))}
    mixco = rows[MIXCO_LABEL]
    assert mixco['compare']['delta'] == pytest.approx(
        statistics.mean(MIXCO.values()) - statistics.mean(MOCO.values()))
    diffs = [MIXCO[0] - MOCO[0], MIXCO[1] - MOCO[1]]  # 3.0, 4.5
    paired = mixco['compare']['paired']
    assert (paired['n'], paired['seeds']) == (2, [0, 1])
    assert paired['delta'] == pytest.approx(3.75)
    assert paired['std'] == pytest.approx(statistics.stdev(diffs))
    tau = rows[f'{MIXCO_LABEL} [model.mix_temperature=0.2]']  # its baseline: MoCo-v2's default
    assert tau['compare']['paired']['delta'] == pytest.approx(((42 - 40) + (41 - 41)) / 2)
    header, *body = md_rows(render_markdown(build_rows(records(legacy)), 'now'))
    cells = {r[2].rstrip(' †'): r for r in body}
    column = header.index('Δ top1 vs baseline, interval (higher is better)')
    mark = ' †' if legacy else ''
    # 2 paired seeds, under min_seeds (5): the differences, no interval, test or P(better)
    assert cells[MIXCO_LABEL][column] == \
        f'+3.75 vs {MOCO_LABEL}{mark} (2 paired seeds); per seed +3.00, +4.50'
    # Records with a setting: MixCo as run is primary, its variant exploratory (a family of one
    # each: a verdict needs 6 seeds); older records are all exploratory (a family of two: 7).
    family, need = ('exploratory', 7) if legacy else ('primary', 6)
    assert cells[MIXCO_LABEL][header.index('sign-flip test')] == \
        f'n=2 < 5: no test; a verdict needs {need} seeds'
    assert cells[MIXCO_LABEL][header.index('verdict (family, size)')] == \
        f"too few seeds ({family}, {2 if legacy else 1})"
    assert cells[MIXCO_LABEL][header.index('P(better), 95% CI')] == ''
    assert cells[MIXCO_LABEL][header.index('top1 interval')] == 'range [43.00, 45.50]'
    parsed = {r['method_label'].rstrip(' †'): r for r in
              csv.DictReader(io.StringIO(render_csv(build_rows(records(legacy)))))}
    assert parsed[MIXCO_LABEL]['paired_delta_n'] == '2'
    assert float(parsed[MIXCO_LABEL]['paired_delta_mean']) == pytest.approx(3.75)
    assert float(parsed[MIXCO_LABEL]['delta']) == pytest.approx(44.1666666 - 40, abs=1e-4)


def test_variants_are_their_own_rows_never_merged():
    body = md_rows(render_markdown(build_rows(records()), 'now'))[1:]
    labels = [r[2] for r in body]
    assert labels == [MOCO_LABEL, MIXCO_LABEL, f'{MIXCO_LABEL} [model.mix_temperature=0.2]']
    by_label = {r[2]: r for r in body}
    assert by_label[MIXCO_LABEL][5] == f"{statistics.mean(MIXCO.values()):.2f} ± " \
                                   f"{statistics.stdev(MIXCO.values()):.2f} (n=3)"
    assert by_label[f'{MIXCO_LABEL} [model.mix_temperature=0.2]'][5] == '41.50 ± 0.71 (n=2)'


@pytest.mark.parametrize('legacy', [False, True])
def test_a_variant_of_the_baseline_is_compared_with_the_same_variant(legacy):
    rows = build_rows([rec('mocov2', 0, 40.0, legacy=legacy),
                       rec('mocov2', 0, 30.0, variant='x=1', legacy=legacy),
                       rec('mixco', 0, 35.0, variant='x=1', legacy=legacy),
                       rec('mixco', 0, 44.0, legacy=legacy)])
    deltas = {r['label'].rstrip(' †'): (r['compare'] or {}).get('delta') for r in rows}
    assert deltas[f'{MIXCO_LABEL} [x=1]'] == pytest.approx(5.0)
    assert deltas[MIXCO_LABEL] == pytest.approx(4.0)


def test_online_protocol_is_labelled_apart_from_offline():
    rows = build_rows([rec('mocov2', 0, 40.0, protocol='linear_fast'),
                       rec('mocov2', 0, 30.0, protocol='online_linear')])
    body = md_rows(render_markdown(rows, 'now'))[1:]
    assert [r[1] for r in body] == ['linear (fast, cached features)',
                                    'linear, online (during pretraining)']


def test_paper_rows_only_beside_ours():
    rows = paper_beside_ours(build_rows([rec('mixco', 0, 40.0, data='cifar10')],
                                        read_paper(PAPER_RESULTS)))
    assert sorted((r['source'] == 'this suite', r['label'], r['eval_data']) for r in rows) == [
        (False, f'{MIXCO_LABEL} (paper)', 'cifar10'), (True, MIXCO_LABEL, 'cifar10')]


def test_monitor_series_joins_the_parts_of_a_resumed_run(tmp_path):
    first, second = tmp_path / '20260101_000000/vis_data', tmp_path / '20260101_010000/vis_data'
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    (first / 'scalars.json').write_text('\n'.join(json.dumps(r) for r in [
        {'loss': 5.0, 'step': 10}, {'knn_monitor/top1': 50.0, 'step': 1},
        {'online_linear/top1': 20.0, 'step': 1}, {'knn_monitor/top1': 55.0, 'step': 2}]) + '\n{"cut')
    (second / 'scalars.json').write_text(json.dumps({'knn_monitor/top1': 60.0, 'step': 3}) + '\n')
    import os
    os.utime(first / 'scalars.json', (1, 1))
    series = monitor_series(str(tmp_path))
    assert series == {'knn_monitor/top1': {1: 50.0, 2: 55.0, 3: 60.0},
                      'online_linear/top1': {1: 20.0}}


def test_mean_and_spread_over_seeds_and_the_plot(tmp_path):
    points = mean_and_spread([{1: 50.0, 2: 60.0}, {1: 54.0}])
    assert points == [(1, 52.0, pytest.approx(statistics.stdev([50, 54])), 2), (2, 60.0, 0.0, 1)]
    groups = {'mocov2': [{'knn_monitor/top1': {1: 50.0, 2: 60.0}}, {'knn_monitor/top1': {1: 54.0}}]}
    assert plot_monitor_curves(groups, str(tmp_path / 'c.png'))
    assert (tmp_path / 'c.png').stat().st_size > 1000
    assert not plot_monitor_curves({'mocov2': [{}]}, str(tmp_path / 'none.png'))


def test_suite_page_names_the_suite_runs_and_curves():
    meta = dict(name='demo', file='configs/suites/demo.py', seeds=[0, 1], procs=2, cfg_options='',
                evaluations='default')
    runs = [dict(run='mocov2_r18_digits-s0', variant='default', seed='0', state='started',
                 log='w/suite_train.log')]
    text = suite_markdown(meta, build_rows(records()), runs, 'now', 'r/runs/*.json', 'curves.png')
    assert text.startswith('# Suite demo\n') and 'Generated by tools/run_suite.py' in text
    assert '\n### ResNet-18 · 100 pretraining epochs · tiny-imagenet' in text
    assert '\n#### Accuracy (%)' in text and '![monitor curves](curves.png)' in text
    assert '| mocov2_r18_digits-s0 | default | 0 | started | w/suite_train.log |' in text


def test_hardware_names_a_share_of_the_machine_and_counts_records_per_host():
    host = {'device': 'cpu', 'cpu': 'Xeon', 'cpu_cores': 2, 'machine_cores': 2}
    share = dict(host, cpu_cores=1)
    older = {'device': 'cpu', 'cpu': 'Xeon', 'cpu_cores': 2}  # written before machine_cores
    records = [{'host': host}, {'host': share}, {'host': share}, {'host': older}, {}]
    assert hardware(records) == ('cpu (Xeon, 2 cores): 2 record(s); cpu (Xeon, 1 of 2 cores): '
                                 '2 record(s); unknown device: 1 record(s)')
    assert hardware([]) == 'no records'


def test_summary_names_each_protocols_settings_as_run():
    """The published block says how each protocol it shows was run (kNN's k and its rule), and
    lists both when two settings of one protocol are shown."""
    from benchmark.reports.suite_board import summary_markdown

    def knn(method, seed, top1, k):
        record = rec(method, seed, top1, protocol='knn')
        record['protocols']['knn']['settings'] = dict(k=k, temperature=0.1, split='train->test',
                                                      k_rule='min(200, 0.4 x smallest class)')
        return record

    rows = build_rows([knn('mocov2', 0, 40.0, 55), knn('mixco', 0, 41.0, 55)])
    text = summary_markdown({'file': 'suite.py'}, rows, [], {}, 'today', 'cpu')
    assert ("Protocols as run (part of each row's identity): kNN: k=55, k_rule=min(200, 0.4 x "
            "smallest class), split=train->test, temperature=0.1.") in text
    rows = build_rows([knn('mocov2', 0, 40.0, 55), knn('mocov2', 0, 38.0, 200)])
    assert 'kNN: k=55, k_rule' in summary_markdown({'file': 's'}, rows, [], {}, 't', 'c')
    assert ' | k=200, k_rule' in summary_markdown({'file': 's'}, rows, [], {}, 't', 'c')
