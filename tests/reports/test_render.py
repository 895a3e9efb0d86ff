"""benchmark.reports.render: leaderboard files from a results folder; the paper CSV's check."""
import csv
import statistics
from pathlib import Path

import pytest

from benchmark.layout import PAPER_RESULTS
from benchmark.reports.records import build_record, write_record
from benchmark.reports.render import PAPER_COLUMNS, read_paper, render_leaderboard


def _record(seed, top1):
    return build_record(method='mocov2', backbone='resnet18', pretrain_data='tiny-imagenet',
                        pretrain_epochs=100, eval_data='tiny-imagenet', seed=seed, world_size=2,
                        total_batch=128, time_s_per_epoch=10.0 * (seed + 1),
                        protocols={'knn': {'settings': {'k': 200}, 'metrics': {'top1': top1}}})


def test_two_records_give_one_row_in_both_files(tmp_path, capsys):
    results = tmp_path / 'results'
    for seed, top1 in ((0, 40.0), (1, 41.5)):
        write_record(_record(seed, top1), str(results))
    (results / 'runs' / 'broken.json').write_text('{')  # reported, not fatal
    paths = render_leaderboard(results, None)
    assert paths == [results / 'leaderboard.md', results / 'leaderboard.csv',
                     results / 'index.html', results / 'intervals.png']
    assert '![intervals: ResNet-18 · 100 pretraining epochs · tiny-imagenet](intervals.png)' \
        in paths[0].read_text()
    out = capsys.readouterr()
    assert out.out.strip() == '2 record(s), 1 row(s)'
    assert 'warning: skipping' in out.err and 'broken.json' in out.err

    rows = list(csv.DictReader(paths[1].open(newline='')))
    assert len(rows) == 1
    row = rows[0]
    assert (row['method'], row['protocol'], row['eval_data'], row['source']) == (
        'mocov2', 'knn', 'tiny-imagenet', 'this suite')
    assert float(row['top1_mean']) == 40.75 and row['top1_n'] == '2'
    assert float(row['top1_std']) == pytest.approx(statistics.stdev([40.0, 41.5]))
    assert row['seeds'] == '0 1' and float(row['time_s_per_epoch']) == 15.0
    text = paths[0].read_text()
    assert '40.75 ± 1.06 (n=2)' in text
    assert f'{results}/runs/*.json' in text  # outside the repo: the path as given


def test_paper_rows_join_the_tables(tmp_path):
    results = tmp_path / 'results'
    render_leaderboard(results, PAPER_RESULTS)
    rows = list(csv.DictReader((results / 'leaderboard.csv').open(newline='')))
    paper = read_paper(PAPER_RESULTS)
    assert len(paper) > 0 and rows and all(r['source'].startswith('paper') for r in rows)


def test_read_paper_checks_its_columns(tmp_path):
    rows = read_paper(PAPER_RESULTS)
    assert set(PAPER_COLUMNS) <= set(rows[0])
    bad = tmp_path / 'paper.csv'
    header = [c for c in PAPER_COLUMNS if c not in ('protocol', 'top1')]
    bad.write_text(','.join(header) + '\n')
    with pytest.raises(ValueError, match=r'^paper results .*paper.csv: missing column\(s\) '
                                         r'protocol, top1$'):
        read_paper(bad)
    with pytest.raises(ValueError, match=r'^paper results .*nope.csv not found; pass --paper CSV'):
        read_paper(Path(tmp_path / 'nope.csv'))
