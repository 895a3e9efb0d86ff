"""Interval plots: a PNG with content for rows with intervals, nothing for the paper's rows
alone, one file per section named after it."""
import numpy as np
import pytest
from matplotlib import image

from benchmark.layout import PAPER_RESULTS
from benchmark.reports.interval_plot import panels_of, plot_intervals, section_figures
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.records import build_record
from benchmark.reports.render import read_paper

pytestmark = pytest.mark.usefixtures('quick_provenance')

TITLE = 'ResNet-18 · 100 pretraining epochs · tiny-imagenet'


def series(method, values, protocol='linear_paper', epochs=100, backbone='resnet18',
           overrides=None):
    return [build_record(method=method, backbone=backbone, pretrain_data='tiny-imagenet',
                         pretrain_epochs=epochs, eval_data='tiny-imagenet', seed=seed,
                         world_size=2, total_batch=128, config=f'{method}_r18_tiny.py',
                         setting_text=f'{method} {overrides}', overrides=overrides,
                         protocols={protocol: {'settings': {}, 'metrics': {'top1': v}}})
            for seed, v in values.items()]


def records():
    return (series('mocov2', {0: 40.0, 1: 41.0, 2: 39.5})
            + series('mixco', {0: 43.0, 1: 44.5, 2: 42.8})
            + series('mixco', {0: 41.0}, overrides={'model.mix_temperature': 0.1})
            + series('mocov2', {0: 30.0, 1: 31.0}, protocol='knn')
            + series('mixco', {0: 33.0, 1: 32.0}, protocol='knn'))


def read_png(path):
    pixels = image.imread(str(path))
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4)
    return pixels[..., :3]


def test_rows_with_intervals_give_a_png_with_content(tmp_path):
    rows = build_rows(records(), read_paper(PAPER_RESULTS))
    section = [r for r in rows if r['pretrain_epochs'] == 100 and r['backbone'] == 'resnet18']
    path = tmp_path / 'plot.png'
    assert plot_intervals(section, str(path), TITLE) is True
    assert path.stat().st_size > 1000
    pixels = read_png(path)
    # 12 inches wide at 100 dpi; one line of panels per (evaluation data, protocol) of ours
    # (the paper's cifar10 rows have no row of ours: no panel)
    assert panels_of(section) == [('tiny-imagenet', 'linear_paper'), ('tiny-imagenet', 'knn')]
    assert pixels.shape[1] == 1200
    linear_only = tmp_path / 'linear.png'
    assert plot_intervals([r for r in section if r['protocol'] != 'knn'], str(linear_only))
    assert read_png(linear_only).shape[0] < pixels.shape[0]  # the kNN panels add height
    white = np.all(pixels > 0.98, axis=2)
    assert 0.01 < 1 - white.mean() < 0.9  # drawn on, not blank, not a solid block
    colours = {tuple(np.round(p, 1)) for p in pixels.reshape(-1, 3)[::7]}
    assert len(colours) > 10  # dots, bars, text and grid in several colours


def test_only_the_papers_rows_give_no_plot(tmp_path):
    rows = build_rows([], read_paper(PAPER_RESULTS))
    assert rows and panels_of(rows) == []
    path = tmp_path / 'none.png'
    assert plot_intervals(rows, str(path)) is False and not path.exists()
    assert section_figures(rows, str(tmp_path / 'figs')) == {}
    diverged = build_record(method='mixco', backbone='resnet18', pretrain_data='tiny-imagenet',
                            pretrain_epochs=100, eval_data='tiny-imagenet', seed=0, world_size=2,
                            total_batch=128, status='diverged', setting_text='mixco',
                            protocols={'linear_paper': {'settings': {},
                                                        'metrics': {'top1': float('nan')}}})
    rows = build_rows([diverged], read_paper(PAPER_RESULTS))  # ours, but without a mean
    assert plot_intervals(rows, str(path)) is False and not path.exists()
    assert list((tmp_path / 'figs').iterdir()) == []


@pytest.mark.slow
def test_section_figures_name_one_file_or_one_per_section(tmp_path):
    one = section_figures(build_rows(records()), str(tmp_path / 'one'))
    assert one == {TITLE: 'intervals.png'}
    assert (tmp_path / 'one' / 'intervals.png').stat().st_size > 1000
    several = build_rows(records() + series('mocov2', {0: 50.0, 1: 52.0}, epochs=200)
                         + series('mixco', {0: 60.0, 1: 61.0}, backbone='resnet50', epochs=200)
                         + series('mocov2', {0: 30.0}, backbone='resnet34', epochs=200),
                         read_paper(PAPER_RESULTS))
    names = section_figures(several, str(tmp_path / 'many'))
    assert names == {
        TITLE: 'intervals_resnet18_100e_tiny-imagenet.png',
        'ResNet-18 · 200 pretraining epochs · tiny-imagenet':
            'intervals_resnet18_200e_tiny-imagenet.png',
        'ResNet-50 · 200 pretraining epochs · tiny-imagenet':
            'intervals_resnet50_200e_tiny-imagenet.png'}
    # paper-only sections and single runs (ResNet-34 here): no interval, no file
    assert sorted(p.name for p in (tmp_path / 'many').iterdir()) == sorted(names.values())
    for name in names.values():
        assert read_png(tmp_path / 'many' / name).std() > 0.01


def test_single_runs_give_no_plot(tmp_path):
    rows = build_rows(series('mocov2', {0: 40.0}) + series('mixco', {5: 41.0}))
    assert not plot_intervals(rows, str(tmp_path / 'single.png'))
    assert not (tmp_path / 'single.png').exists()
