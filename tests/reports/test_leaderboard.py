"""Leaderboard tables: statistics over seeds, MixCo's Δ, the paper's rows, csv, the tool."""
import csv
import io
import statistics
import subprocess
import sys

import pytest

from benchmark.layout import REPO_ROOT
from benchmark.names import RANDOM_INIT
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.tables import render_csv, render_markdown
from benchmark.reports.records import build_record, write_record

pytestmark = pytest.mark.usefixtures('quick_provenance')

ROOT = REPO_ROOT
PAPER_CSV = ROOT / 'results' / 'paper_results.csv'


def record(method, seed, metrics, protocol='linear_paper', status='ok', **overrides):
    kwargs = dict(method=method, backbone='resnet18', pretrain_data='tiny-imagenet',
                  pretrain_epochs=100, eval_data='tiny-imagenet', seed=seed, world_size=2,
                  total_batch=128, time_s_per_epoch=100.0 + seed, peak_memory_gb=3.0,
                  protocols={protocol: {'settings': {}, 'metrics': metrics}}, status=status,
                  config=f'{method}_r18_tiny.py', setting_text=f'the shipped {method} config')
    kwargs.update(overrides)
    return build_record(**kwargs)


def paper():
    with PAPER_CSV.open(newline='') as f:
        return list(csv.DictReader(f))


def md_rows(text):
    """Markdown table rows as lists of cells."""
    return [[c.strip() for c in line.strip('|').split(' | ')]
            for line in text.splitlines() if line.startswith('| ') and '---' not in line]


def find(rows, **match):
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def test_seeds_give_mean_std_n():
    top1 = [40.0, 41.5]
    rows = build_rows([record('mocov2', s, {'top1': v}) for s, v in enumerate(top1)])
    text = render_markdown(rows, 'today')
    mean, std = statistics.mean(top1), statistics.stdev(top1)
    row = md_rows(text)[1]
    assert row[2] == 'MoCo-v2' and row[5] == f'{mean:.2f} ± {std:.2f} (n=2)'
    assert row[-4] == '100.5'  # time s/epoch: mean over the records
    single = md_rows(render_markdown(build_rows([record('mocov2', 0, {'top1': 40.0})]), 'x'))
    assert single[1][5] == '40.00 (n=1)'


def test_mixco_shows_delta_vs_its_baseline():
    records = [record('mocov2', 0, {'top1': 40.0}), record('mocov2', 1, {'top1': 41.0}),
               record('mixco', 0, {'top1': 44.0}), record('mixco', 1, {'top1': 45.5}),
               record('simclr', 0, {'top1': 30.0}), record('mixco_simclr', 0, {'top1': 31.0}),
               record('mixco', 0, {'top1': 50.0}, eval_data='cifar10')]  # no baseline there
    text = render_markdown(build_rows(records), 'today')
    header, *body = md_rows(text)
    col = header.index('Δ top1 vs baseline, interval (higher is better)')
    by_label = {(r[0], r[2]): r for r in body}
    # 2 paired seeds, under min_seeds: the differences seed by seed, no interval
    assert by_label['tiny-imagenet', 'MixCo (MoCo-v2)'][col] == \
        f'{44.75 - 40.5:+.2f} vs MoCo-v2 (2 paired seeds); per seed +4.00, +4.50'
    assert by_label['tiny-imagenet', 'MixCo (SimCLR)'][col] == \
        '+1.00 vs SimCLR (1 paired seed); per seed +1.00'
    assert by_label['tiny-imagenet', 'MixCo (MoCo-v2)'][header.index('top1 interval')] == \
        'range [44.00, 45.50]'
    assert by_label['tiny-imagenet', 'MoCo-v2'][col] == ''
    assert by_label['cifar10', 'MixCo (MoCo-v2)'][col] == ''
    # MixCo sits right after its baseline; each method by its label in benchmark/names.py.
    labels = [r[2] for r in body if r[0] == 'tiny-imagenet']
    assert labels == ['MoCo-v2', 'MixCo (MoCo-v2)', 'SimCLR', 'MixCo (SimCLR)']
    csv_rows = list(csv.DictReader(io.StringIO(render_csv(build_rows(records)))))
    mixco = find(csv_rows, method='mixco', eval_data='tiny-imagenet')
    assert (mixco['delta_baseline'], mixco['delta_metric']) == ('mocov2', 'top1')
    assert mixco['method_label'] == 'MixCo (MoCo-v2)'  # the CSV's method: the record name
    assert float(mixco['delta']) == pytest.approx(4.25)


def test_rows_show_the_method_label_and_the_csv_the_record_name():
    """The tables show a method by its label in benchmark/names.py; the untrained encoder as
    'random init'; a method the vocabulary does not know by its record name. The CSV's method
    column keeps the record name, its method_label column the label."""
    rows = build_rows([record('nosuchmethod', 0, {'top1': 30.0}),
                       record('mixco', 0, {'top1': 44.0}), record(RANDOM_INIT, 0, {'top1': 5.0})])
    assert [r[2] for r in md_rows(render_markdown(rows, 'today'))[1:]] == [
        'random init', 'MixCo (MoCo-v2)', 'nosuchmethod']
    assert [(r['method'], r['method_label']) for r in csv.DictReader(io.StringIO(
        render_csv(rows)))] == [('random_init', 'random init'), ('mixco', 'MixCo (MoCo-v2)'),
                                ('nosuchmethod', 'nosuchmethod')]


def test_cluster_delta_is_davies_bouldin_lower_better():
    metrics = lambda db: dict(davies_bouldin=db, calinski_harabasz=10.0, kmeans_nmi=0.5,
                              kmeans_ari=0.25)
    rows = build_rows([record('mocov2', 0, metrics(2.0), protocol='cluster'),
                       record('mixco', 0, metrics(1.5), protocol='cluster')])
    header, _, mixco = md_rows(render_markdown(rows, 'today'))
    assert mixco[header.index('Δ davies_bouldin vs baseline, interval (lower is better)')] == \
        '-0.500 vs MoCo-v2 (1 paired seed); per seed -0.500'
    assert mixco[header.index('verdict (family, size)')] == 'too few seeds (exploratory, 1)'
    assert mixco[header.index('kmeans_ari')] == '0.250 (n=1)'


def ours_row(table):
    return next(r for r in table if r[2] == 'MixCo (MoCo-v2)' and r[0] == 'tiny-imagenet')


def test_paper_rows_are_labelled_and_grouped():
    rows = build_rows([record('mixco', 0, {'top1': 40.0})], paper())
    text = render_markdown(rows, 'today')
    section = text.split('## ResNet-18 · 100 pretraining epochs · tiny-imagenet')[1]
    section = section.split('\n## ')[0]
    table = md_rows(section)
    ours = find([dict(label=r[2], source=r[3], top1=r[5], eval=r[0]) for r in table],
                label='MixCo (MoCo-v2)', eval='tiny-imagenet')
    assert ours == dict(label='MixCo (MoCo-v2)', source='this suite', top1='40.00 (n=1)',
                        eval='tiny-imagenet')
    theirs = [r for r in table if r[0] == 'tiny-imagenet' and r[2] == 'MixCo (MoCo-v2) (paper)']
    assert len(theirs) == 1 and theirs[0][5] == '42.65' and theirs[0][3].startswith('paper Table')
    assert theirs[0][1] == 'linear (paper protocol)'
    assert theirs[0][-4:-1] == ['153.2', '4.50', '']  # Table 3: time and memory
    header = md_rows(section)[0]
    assert ours_row(table)[header.index('ours − paper (top1)')] == \
        '-2.65 vs 42.65 (linear (paper protocol), paper Table 1, 3, 6)'
    assert any(r[2] == 'supervised (paper)' and r[5] == '63.96' for r in table)
    csv_rows = list(csv.DictReader(io.StringIO(render_csv(rows))))
    paper_mixco = find(csv_rows, backbone='resnet18', pretrain_epochs='100', eval_data='cifar10',
                       method='mixco', protocol='linear_paper')
    assert paper_mixco['top1_mean'] == '74.25' and paper_mixco['method_label'] == \
        'MixCo (MoCo-v2) (paper)'
    assert float(paper_mixco['delta']) == pytest.approx(74.25 - 71.02)


def test_csv_parses_back_and_keeps_linear_protocols_apart():
    records = [record('mocov2', 0, {'top1': 40.0, 'top5': 'NA(few classes)'}),
               record('mocov2', 0, {'top1': 45.0}, protocol='linear_fast')]
    rows = build_rows(records)
    parsed = list(csv.DictReader(io.StringIO(render_csv(rows))))
    assert len(parsed) == 2
    for column in ('backbone', 'pretrain_epochs', 'pretrain_data', 'eval_data', 'protocol',
                   'protocol_label', 'method', 'method_label', 'source', 'status',
                   'top1_mean', 'top1_std', 'top1_n', 'top5_mean', 'davies_bouldin_mean',
                   'kmeans_ari_n', 'delta', 'time_s_per_epoch', 'peak_memory_gb', 'seeds'):
        assert column in parsed[0]
    by_protocol = {r['protocol']: r for r in parsed}
    assert by_protocol['linear_paper']['top1_mean'] == '40.0'
    assert by_protocol['linear_paper']['protocol_label'] == 'linear (paper protocol)'
    assert by_protocol['linear_paper']['top5_mean'] == 'NA'
    assert by_protocol['linear_fast']['top1_mean'] == '45.0'
    assert by_protocol['linear_fast']['protocol_label'] == 'linear (fast, cached features)'
    table = md_rows(render_markdown(rows, 'today'))
    assert [r[1] for r in table[1:]] == ['linear (paper protocol)',
                                         'linear (fast, cached features)']
    assert table[1][6] == 'NA' and 'NA(few classes)' in table[1][-1]


def test_diverged_runs_are_shown_not_averaged():
    rows = build_rows([record('mixco', 0, {'top1': 44.0}), record('mixco', 1, {'top1': 46.0}),
                       record('mixco', 2, {'top1': float('nan')}, status='diverged')])
    body = md_rows(render_markdown(rows, 'today'))[1:]
    assert [(r[4], r[5]) for r in body] == [('ok', '45.00 ± 1.41 (n=2)'), ('diverged', 'NA')]


def test_rows_are_sorted_by_backbone_epochs_data():
    records = [record('mocov2', 0, {'top1': 1.0}, backbone='resnet50', pretrain_epochs=200),
               record('mocov2', 0, {'top1': 2.0}, eval_data='cifar10'),
               record('mocov2', 0, {'top1': 3.0}, pretrain_epochs=200),
               record('mocov2', 0, {'top1': 4.0}, protocol='knn'),
               record('mocov2', 0, {'top1': 5.0})]
    order = [(r['backbone'], r['pretrain_epochs'], r['eval_data'], r['protocol'])
             for r in build_rows(records)]
    assert order == [('resnet18', 100, 'tiny-imagenet', 'linear_paper'),
                     ('resnet18', 100, 'tiny-imagenet', 'knn'),
                     ('resnet18', 100, 'cifar10', 'linear_paper'),
                     ('resnet18', 200, 'tiny-imagenet', 'linear_paper'),
                     ('resnet50', 200, 'tiny-imagenet', 'linear_paper')]


@pytest.mark.slow
def test_tool_writes_both_files(tmp_path, subprocess_env):
    for seed in (0, 1):
        write_record(record('mixco', seed, {'top1': 44.0 + seed}), str(tmp_path))
    (tmp_path / 'runs' / 'broken.json').write_text('{')
    proc = subprocess.run([sys.executable, 'tools/leaderboard.py', '--results-dir', str(tmp_path)],
                          cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    md, table = tmp_path / 'leaderboard.md', tmp_path / 'leaderboard.csv'
    assert str(md) in proc.stdout and str(table) in proc.stdout
    first = md.read_text().splitlines()[0].lower()
    assert 'generated by tools/leaderboard.py' in first and 'do not edit by hand' in first
    assert '44.50 ± 0.71 (n=2)' in md.read_text() and 'MixCo (MoCo-v2) (paper)' in md.read_text()
    assert 'broken.json' in proc.stderr
    assert any(r['source'] == 'this suite' for r in csv.DictReader(table.open()))


def test_tool_reports_a_missing_paper_csv_in_one_line(tmp_path, subprocess_env):
    proc = subprocess.run([sys.executable, 'tools/leaderboard.py', '--results-dir', str(tmp_path),
                           '--paper', str(tmp_path / 'nope.csv')], cwd=ROOT, env=subprocess_env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith('error: ')
    assert len(proc.stderr.strip().splitlines()) == 1


# Protocol settings are part of a row's identity

KNN = dict(temperature=0.1, split='train->test')


def evaluated(method, seed, metrics, protocol, settings, created):
    """A record of one protocol evaluated with `settings`, written at `created` (a day)."""
    rec = record(method, seed, metrics, protocols={protocol: {'settings': settings,
                                                              'metrics': metrics}})
    return dict(rec, created=f'2026-01-{created:02d}T00:00:00+00:00')


def test_a_seed_evaluated_with_two_knn_k_gives_two_rows_labelled_apart():
    records = [evaluated('mocov2', 0, {'top1': 40.0}, 'knn', dict(KNN, k=200), 1),
               evaluated('mocov2', 0, {'top1': 35.0}, 'knn', dict(KNN, k=20), 2),
               evaluated('mocov2', 1, {'top1': 36.0}, 'knn', dict(KNN, k=20), 3),
               evaluated('mocov2', 1, {'top1': 37.0}, 'knn', dict(KNN, k=20), 4)]
    rows = build_rows(records)
    assert len(rows) == 2
    wide = find(rows, protocol_settings='k=200, split=train->test, temperature=0.1')
    narrow = find(rows, protocol_settings='k=20, split=train->test, temperature=0.1')
    assert (wide['seeds'], wide['metrics']['top1']['mean'], wide['superseded']) == ([0], 40.0, [])
    assert (narrow['seeds'], narrow['metrics']['top1']['mean']) == ([0, 1], 36.0)
    assert narrow['superseded'] == [f"seed 1 recorded again ({records[2]['id']}, superseded by "
                                    f"{records[3]['id']})"]
    assert (wide['label'], narrow['label']) == ('MoCo-v2 · k=200', 'MoCo-v2 · k=20')
    labels = [r[2] for r in md_rows(render_markdown(rows, 'today'))[1:]]
    assert sorted(labels) == ['MoCo-v2 · k=20', 'MoCo-v2 · k=200']
    parsed = list(csv.DictReader(io.StringIO(render_csv(rows))))
    assert sorted((r['protocol_settings'], r['top1_n']) for r in parsed) == [
        ('k=20, split=train->test, temperature=0.1', '2'),
        ('k=200, split=train->test, temperature=0.1', '1')]
    # One setting only: the label stays the method's.
    assert [r['label'] for r in build_rows(records[1:])] == ['MoCo-v2']


def test_incidental_settings_such_as_the_tsne_figure_do_not_split_rows():
    metrics = dict(davies_bouldin=2.0, calinski_harabasz=10.0, kmeans_nmi=0.5, kmeans_ari=0.25)
    tsne = dict(classes=10, per_class=1000, split='train', embedding='tsne-2d')
    records = [evaluated('mocov2', seed, metrics, 'cluster_tsne',
                         dict(tsne, seed=seed, figure=f'results/runs/r{seed}/tsne.png'), seed + 1)
               for seed in (0, 1)]
    records.append(evaluated('mocov2', 0, metrics, 'cluster_tsne',
                             dict(tsne, seed=0, figure='/elsewhere/tsne.png', device='cuda:1',
                                  work_dir='scratch/x', num_workers=8), 3))
    rows = build_rows(records)
    assert len(rows) == 1 and rows[0]['seeds'] == [0, 1] and rows[0]['label'] == 'MoCo-v2'
    assert rows[0]['protocol_settings'] == \
        'classes=10, embedding=tsne-2d, per_class=1000, split=train'
    assert len(rows[0]['superseded']) == 1  # seed 0 again, the newest record counts
    other = evaluated('mocov2', 0, metrics, 'cluster_tsne', dict(tsne, per_class=100), 4)
    assert len(build_rows(records + [other])) == 2  # a defining setting still splits


def test_records_without_protocol_settings_group_as_before():
    records = [evaluated('mocov2', 0, {'top1': 40.0}, 'knn', {}, 1),
               evaluated('mocov2', 0, {'top1': 42.0}, 'knn', {}, 2),
               evaluated('mocov2', 1, {'top1': 44.0}, 'knn', {}, 3)]
    (row,) = build_rows(records)
    assert (row['seeds'], row['metrics']['top1']['mean'], row['protocol_settings']) == \
        ([0, 1], 43.0, '')
    assert row['label'] == 'MoCo-v2' and len(row['superseded']) == 1
    # Beside recorded settings, they are their own row and say so.
    knn = evaluated('mocov2', 0, {'top1': 1.0}, 'knn', dict(KNN, k=200), 4)
    rows = build_rows(records + [knn])
    assert sorted(r['label'] for r in rows) == [
        'MoCo-v2 · k=200, split=train->test, temperature=0.1', 'MoCo-v2 · settings not recorded']
    assert find(rows, protocol_settings='')['seeds'] == [0, 1]
