"""Every page for every set of records a suite can produce: `tools/leaderboard.py` over one
folder holding each generated degenerate set in a section of its own (constant and zero paired
differences, all seeds equal, one seed, NA evaluations, a method without its baseline, a tie
of several methods, a hundred rows) writes its tables, CSV and figures, and every interval it
prints holds its mean; a figure that cannot be drawn leaves a note, never a stopped page."""
import csv
import json
import re

import pytest

from benchmark.cli import run_tool
from benchmark.reports import aggregate_board, interval_plot
from benchmark.reports.explorer import EXPLORER
from benchmark.reports.figures import NotDrawn, drawn, figure_lines
from benchmark.reports.records import write_record
from benchmark.reports.render import render_leaderboard
from tests.reports.record_sets import STEP, record, record_sets
from tools import leaderboard

pytestmark = pytest.mark.usefixtures('quick_provenance')


def number(text):
    return float(text) if text not in ('', 'NA') else None


def test_every_record_set_gives_its_tables_csv_and_figures(tmp_path, capsys):
    sets = record_sets()  # after quick_provenance: no git process per record
    for records in sets.values():
        for one in records:
            write_record(one, str(tmp_path))
    code = run_tool(leaderboard.main, ['--results-dir', str(tmp_path), '--paper', 'none'])
    err = capsys.readouterr().err
    assert code == 0, err
    page = (tmp_path / 'leaderboard.md').read_text()
    rows = list(csv.DictReader((tmp_path / 'leaderboard.csv').open(newline='')))
    table_rows = [line for line in page.splitlines() if line.startswith('| digits | ')]
    assert len(rows) == len(table_rows) > 100
    assert page.count('\n## ResNet-18 · ') == len(sets)
    for name in re.findall(r'!\[[^\]]*\]\(([^)]+)\)', page):
        assert (tmp_path / name).stat().st_size > 1000, name
    assert len(re.findall(r'!\[intervals: ', page)) == len(sets)
    assert 'not drawn' not in page + err
    for row in rows:  # every interval holds its mean, every mean lies within the seeds' range
        mean = number(row[f"{row['main_metric']}_mean"])
        for low, high in (('ci_low', 'ci_high'), ('range_low', 'range_high')):
            if row[low]:
                assert float(row[low]) <= mean <= float(row[high]), (row['method_label'], low)
        if row['paired_ci_low']:
            assert (float(row['paired_ci_low']) <= float(row['paired_delta_mean'])
                    <= float(row['paired_ci_high']))
    by_section = {}
    for row in rows:
        if row['delta_baseline'] and row['protocol'] == 'knn':
            by_section.setdefault(int(row['pretrain_epochs']), []).append(row)
    names = list(sets)
    verdict = lambda name: [r['verdict'] for r in by_section.get(names.index(name) + 1, [])]
    assert verdict('constant one image') == verdict('constant +0.40') == ['better']
    assert verdict('constant, 18 seeds') == ['better']
    assert verdict('constant at min_seeds') == ['undecided']  # at 5 seeds: no 95% interval
    assert verdict('zero differences') == verdict('all seeds equal') == ['undecided']
    assert verdict('one seed') == ['too few seeds']
    assert verdict('method without its baseline') == []
    constant = next(r for r in by_section[1])
    assert float(constant['paired_ci_low']) == pytest.approx(STEP)
    assert float(constant['pooled_sd']) == 0.0 and constant['mde'] == ''
    assert 'Friedman test over 6 seeds' in page  # four methods tied on every seed
    explorer = (tmp_path / EXPLORER).read_text()
    assert len(explorer.encode()) < 1_000_000  # a hundred rows and more: under 1 MB
    data = json.loads(re.search(r'id="data">(.*?)</script>', explorer, re.S).group(1))
    assert [dict(zip(data['columns'], line['csv'])) for line in data['rows']] == rows
    assert set(data['sections']) <= {f'ResNet-18 · {e} pretraining epochs · digits'
                                     for e in range(1, len(sets) + 1)}


def test_a_figure_that_cannot_be_drawn_leaves_a_note(tmp_path, monkeypatch, capsys):
    for seed in range(6):
        write_record(record('mocov2', seed, 90.0 + seed, protocols=('knn',)), str(tmp_path))
        write_record(record('mixco', seed, 90.0 + seed + STEP, protocols=('knn',)),
                     str(tmp_path))
    (tmp_path / 'intervals.png').write_bytes(b'a stale figure of an earlier rendering')

    def fails(*args, **kwargs):
        raise ValueError('cannot draw this\nsecond line')
    monkeypatch.setattr(interval_plot, 'plot_intervals', fails)
    monkeypatch.setattr(aggregate_board, 'plot_profile', fails)
    paths = render_leaderboard(tmp_path, None)
    assert [p.name for p in paths] == ['leaderboard.md', 'leaderboard.csv', 'index.html']
    page = paths[0].read_text()
    title = 'ResNet-18 · 30 pretraining epochs · digits'
    assert (f'_the interval plot of {title} was not drawn (ValueError: cannot draw this)._'
            in page)
    assert f'_the performance profile of {title} was not drawn' in page
    assert not (tmp_path / 'intervals.png').exists()
    err = capsys.readouterr().err
    assert f'warning: the interval plot of {title} was not drawn' in err
    assert '| digits | kNN | MixCo (MoCo-v2) |' in page
    figures = {'a': 'a.png', 'b': NotDrawn('b was not drawn (OSError)')}
    assert figure_lines(figures, 'a', 'A') == ['![A](a.png)'] and drawn(figures) == ['a.png']
    assert figure_lines(figures, 'b', 'B') == ['_b was not drawn (OSError)._']
    assert figure_lines(figures, 'c', 'C') == []
