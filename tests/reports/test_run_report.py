"""report.md of a record: title, metrics table, training curves and the t-SNE figure."""
import json
import os
from pathlib import Path

import pytest
from PIL import Image

from benchmark.evaluation.evaluate import record_evaluation
from benchmark.reports.run_report import plot_curves, read_scalars, write_run_report

RUN = dict(method='mixco', backbone='resnet18', pretrain_data='digits', pretrain_epochs=3,
           seed=0, world_size=2, total_batch=32, time_s_per_epoch=12.5, peak_memory_gb=0.75,
           config='mixco_r18_digits.py')


def make_record(tmp_path: Path, with_tsne: bool = True) -> Path:
    """A record as tools/train.py writes it: knn with an NA metric, cluster, t-SNE figure."""
    protocols = {'knn': {'settings': {'k': 200, 'temperature': 0.1, 'split': 'train->test'},
                         'metrics': {'top1': 51.254, 'top5': 'NA(4 classes)'}},
                 'cluster': {'settings': {'classes': 10, 'per_class': 1000},
                             'metrics': {'davies_bouldin': 2.0, 'calinski_harabasz': 1234.5678}}}
    if with_tsne:
        figure = tmp_path / 'work' / 'tsne.png'
        figure.parent.mkdir(parents=True, exist_ok=True)
        Image.new('RGB', (8, 8), 'white').save(figure)
        protocols['cluster_tsne'] = {'settings': {'embedding': 'tsne-2d', 'figure': str(figure)},
                                     'metrics': {'davies_bouldin': 'NA(one class)'}}
    return record_evaluation(protocols, RUN, 'digits', str(tmp_path / 'results'))


def write_scalars(work_dir: Path, stamp: str, epochs: int = 3, iters: int = 4) -> Path:
    """mmengine's scalars.json: loss lines, knn_monitor lines, a val line, a cut-off line."""
    path = work_dir / stamp / 'vis_data' / 'scalars.json'
    path.parent.mkdir(parents=True)
    lines = []
    for epoch in range(1, epochs + 1):
        for i in range(1, iters + 1):
            step = (epoch - 1) * iters + i
            inst, mix = 6.0 / step ** 0.3, 3.0 / step ** 0.2
            lines.append(dict(lr=0.01, loss=inst + mix, loss_inst=inst, loss_mix=mix,
                              acc_inst=step / 20, lam_mean=0.5, epoch=epoch, iter=step, step=step))
        lines.append({'knn_monitor/top1': 20.0 * epoch, 'knn_monitor/top5': 30.0 * epoch,
                      'step': epoch})
    lines.append({'accuracy/top1': 40.0, 'step': epochs})  # a validation line: not plotted
    path.write_text('\n'.join(json.dumps(line) for line in lines) + '\n{"loss": 1.0, "st')
    return path


def test_report_has_title_table_curves_and_tsne(tmp_path):
    record = make_record(tmp_path)
    write_scalars(tmp_path / 'work', '20260101_000000')
    report = Path(write_run_report(str(record), str(tmp_path / 'work')))
    assert report == record.with_suffix('') / 'report.md'
    text = report.read_text()
    assert text.startswith('# mixco resnet18: digits, 3 epochs\n')
    assert '| protocol | settings | metric | value |' in text
    assert '| knn | k=200, split=train->test, temperature=0.1 | top1 | 51.25 |' in text
    assert '|  |  | top5 | NA(4 classes) |' in text  # NA strings as they are
    assert '| cluster | classes=10, per_class=1000 | calinski_harabasz | 1234.57 |' in text
    assert '|  |  | davies_bouldin | 2.00 |' in text
    assert '| cluster_tsne | embedding=tsne-2d | davies_bouldin | NA(one class) |' in text
    assert text.index('| knn |') < text.index('| cluster |') < text.index('| cluster_tsne |')
    assert '![training curves](curves.png)' in text and '![t-SNE](tsne.png)' in text
    assert (report.parent / 'tsne.png').is_file()  # the links resolve beside report.md
    with Image.open(report.parent / 'curves.png') as image:
        assert image.format == 'PNG' and image.width > 500 and image.height > 300
        assert len(image.convert('L').getcolors(1 << 16)) > 10  # something drawn, not blank


def test_tsne_link_found_from_another_working_directory(tmp_path, monkeypatch):
    """The record's figure path is relative to where it was written; the file sits beside it."""
    monkeypatch.chdir(tmp_path)
    record = make_record(Path('.'))
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    text = Path(write_run_report(str(tmp_path / record), None)).read_text()
    assert '![t-SNE](tsne.png)' in text


def test_without_logs_the_curves_section_says_so(tmp_path):
    record = make_record(tmp_path, with_tsne=False)
    for work_dir in (None, str(tmp_path / 'empty')):
        text = Path(write_run_report(str(record), work_dir)).read_text()
        assert 'No training logs' in text and 'curves.png' not in text and 't-SNE' not in text
    assert not (record.with_suffix('') / 'curves.png').exists()


def test_newest_scalars_are_read_and_broken_lines_skipped(tmp_path):
    old = write_scalars(tmp_path, '20250101_000000', epochs=1)
    new = write_scalars(tmp_path, '20260101_000000', epochs=2)
    os.utime(old, (1e9, 1e9))
    path, rows = read_scalars(str(tmp_path))
    assert path == new
    assert len(rows) == 2 * 4 + 2 + 1  # the cut-off last line is dropped
    assert [r['knn_monitor/top1'] for r in rows if 'knn_monitor/top1' in r] == [20.0, 40.0]


def test_curves_with_only_losses_or_nothing(tmp_path):
    rows = [dict(loss=2.0 - s / 10, step=s) for s in range(1, 6)]
    assert plot_curves(rows, str(tmp_path / 'loss.png'))
    with Image.open(tmp_path / 'loss.png') as image:
        assert image.format == 'PNG'
    assert not plot_curves([{'accuracy/top1': 1.0, 'step': 1}], str(tmp_path / 'none.png'))
    assert not (tmp_path / 'none.png').exists()


@pytest.mark.parametrize('n', [3, 6])
def test_report_places_the_run_among_its_folder(tmp_path, n):
    """Seeds of MoCo-v2 and MixCo in one folder: MixCo's report shows its row's mean with its
    interval (the seeds' range under min_seeds, 5), the paired comparison and the section's
    interval plot. At 6 seeds the 95% sign-flip interval is the range of the values, at
    1 - 2/64 (two sign patterns of 64 are as extreme as all-positive)."""
    from benchmark.reports.records import build_record, write_record

    results = tmp_path / 'results'
    values = {'mocov2': [40.0, 41.0, 39.5, 40.3, 40.8, 39.9][:n],
              'mixco': [43.0, 42.0, 44.5, 42.7, 43.3, 42.1][:n]}
    path = None
    for method, tops in values.items():
        for seed, top1 in enumerate(tops):
            record = build_record(method=method, backbone='resnet18', pretrain_data='digits',
                                  pretrain_epochs=30, eval_data='digits', seed=seed, world_size=2,
                                  total_batch=64, setting_text=method,
                                  protocols={'knn': {'settings': {}, 'metrics': {'top1': top1}}})
            path = write_record(record, str(results))
    text = Path(write_run_report(str(path), None)).read_text()
    assert '## Among the records of its folder' in text
    mixco = values['mixco']
    diffs = [a - b for a, b in zip(mixco, values['mocov2'])]
    mean, delta = sum(mixco) / n, sum(diffs) / n
    if n < 5:
        per_seed = ', '.join(f'{d:+.2f}' for d in diffs)
        row = (f'| knn | MixCo (MoCo-v2) | top1 | {n} | {mean:.2f} range [{min(mixco):.2f}, '
               f'{max(mixco):.2f}] | {delta:+.2f} vs MoCo-v2 ({n} paired seeds); per seed '
               f'{per_seed} | n={n} < 5: no test; a verdict needs 6 seeds |')
    else:
        p = 2 / 2 ** n  # every difference positive: the smallest p 6 seeds can give
        row = (f'| knn | MixCo (MoCo-v2) | top1 | {n} | {mean:.2f} [{min(mixco):.2f}, '
               f'{max(mixco):.2f}] (96.9%) | {delta:+.2f} [{min(diffs):+.2f}, {max(diffs):+.2f}] '
               '(96.9%) vs '
               f'MoCo-v2 ({n} paired seeds) | p {p:.2g}, Holm {p:.2g} |')
    assert row in text, text
    assert '![intervals of the section](intervals.png)' in text
    assert (path.parent / path.stem / 'intervals.png').stat().st_size > 1000
