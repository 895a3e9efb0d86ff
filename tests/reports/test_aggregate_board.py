"""The aggregates across tasks on the leaderboard and the suite page: records -> rows -> the
section's line per method (checked against naive references on the same numbers), intervals
withheld under min_seeds, the Friedman sentence and the figures; variants and overridden rows
stay out of the tasks."""
import numpy as np
import pytest

from benchmark.reports import aggregate
from benchmark.reports.aggregate_board import (across_sections, aggregate_figures, method_lines,
                                               rank_test, section_tasks)
from benchmark.reports.comparisons import StatsPolicy
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.suite_board import summary_markdown
from benchmark.reports.tables import render_markdown
from tests.reports.test_aggregate import naive_improvement, naive_iqm

PROTOCOLS = ('knn', 'linear_fast')


def record(method, seed, scores, overrides=None, variant_of=None):
    return dict(
        id=f'{method}-{seed}-{variant_of or ""}', created=f'2026-01-01T00:00:{seed:02d}',
        method=method, backbone='resnet18', pretrain_data='digits', pretrain_epochs=30,
        eval_data='digits', seed=seed, world_size=1, total_batch=64, time_s_per_epoch=None,
        peak_memory_gb=None, config=f'{method}_r18_digits.py', status='ok', extra={},
        setting_sha256=f'setting-{method}-{variant_of or ""}', overrides=overrides or {},
        protocols={p: dict(settings=dict(k=20) if p == 'knn' else dict(epochs=100),
                           metrics=dict(top1=float(v))) for p, v in zip(PROTOCOLS, scores)})


def suite(values, **extra):
    """values: {method: array (seeds, tasks)} -> leaderboard rows."""
    records = [record(m, s, scores) for m, matrix in values.items()
               for s, scores in enumerate(matrix)]
    for m, matrix in extra.items():  # an overridden setting of the same method: not a task
        records += [record(m, s, scores, overrides={'model.mix_temperature': 0.1},
                           variant_of='t0.1') for s, scores in enumerate(matrix)]
    return build_rows(records, (), StatsPolicy())


def draw(n, shift, seed):
    """Seeds (rows) x tasks: a seed's effect shared by every method, as paired seeds are."""
    shared = np.random.default_rng(0).normal(0, 1, size=(n, 1))
    noise = np.random.default_rng(seed).normal(0, 0.4, size=(n, 2))
    return np.round(90 + shift + shared + noise, 2)


def test_the_line_per_method_equals_naive_references_on_the_same_numbers():
    moco, mixco, imix = draw(6, 0, 1), draw(6, 1, 2), draw(6, -1, 3)
    rows = suite(dict(mocov2=moco, mixco=mixco, imix=imix), mixco=draw(6, 5, 4))
    by_method = section_tasks(rows)
    assert sorted(by_method) == ['imix', 'mixco', 'mocov2']
    assert len(by_method['mixco']) == 2  # the overridden setting is not a task
    lines = {line['method']: line for line in method_lines(by_method, 5)}
    for method, matrix in (('mixco', mixco), ('imix', imix)):
        diffs = (matrix - moco).ravel()
        line = lines[method]
        assert line['iqm'] == pytest.approx(naive_iqm(diffs), abs=1e-9)
        assert line['mean'] == pytest.approx(diffs.mean(), abs=1e-9)
        tasks = lambda m: [{s: m[s, t] for s in range(6)} for t in range(2)]
        assert line['improve'] == pytest.approx(naive_improvement(tasks(matrix), tasks(moco)))
        assert line['iqm_ci'][0] <= line['iqm'] <= line['iqm_ci'][1]
        assert line['seeds'] == 6 and len(line['tasks']) == 2
    assert lines['mixco']['mean_ci'][0] > 0 > lines['imix']['mean_ci'][1]


def test_under_min_seeds_the_point_shows_and_the_interval_waits():
    rows = suite(dict(mocov2=draw(3, 0, 1), mixco=draw(3, 1, 2)))
    text = '\n'.join(across_sections(rows)['ResNet-18 · 30 pretraining epochs · digits'])
    assert 'intervals from 5 seeds' in text and '[' not in text.split('\n')[4]
    line = method_lines(section_tasks(rows), 5)[0]
    assert line['iqm_ci'] is None and line['improve_ci'] is None


def test_friedman_over_seeds_with_three_methods_and_its_figures(tmp_path):
    values = dict(mocov2=draw(6, 0, 1), mixco=draw(6, 2, 2), imix=draw(6, -2, 3))
    rows = suite(values)
    test = rank_test(section_tasks(rows), 5)
    per_seed = [[values[m][s].mean() for m in test['methods']] for s in range(6)]
    assert test['p'] == pytest.approx(aggregate.friedman(per_seed)['p'])
    assert test['average_ranks'][test['methods'].index('mixco')] == pytest.approx(1.0)
    text = render_markdown(rows, 'now', across=across_sections(rows),
                           figures=aggregate_figures(rows, str(tmp_path)))
    assert 'Friedman test over 6 seeds (3 methods' in text and 'exact permutation p' in text
    assert '![profile: ' in text and '![ranks: ' in text
    assert (tmp_path / 'profile.png').stat().st_size > 0 and (tmp_path / 'ranks.png').is_file()
    few = rank_test(section_tasks(suite({m: v[:3] for m, v in values.items()})), 5)
    assert few['why'] == '3 seed(s) shared by every method, under min_seeds 5'


def test_the_published_block_carries_the_aggregates():
    rows = suite(dict(mocov2=draw(5, 0, 1), mixco=draw(5, 1, 2)))
    meta = dict(file='configs/suites/x.py')
    text = summary_markdown(meta, rows, [], {}, 'now', 'cpu')
    assert 'Across tasks (2: kNN on digits, linear (fast, cached features) on digits)' in text
    assert '| MixCo (MoCo-v2) | MoCo-v2 | 2 | 5 |' in text
