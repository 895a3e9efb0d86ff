"""The suite's leaderboard files from records joined to its runs: variants on the rows, other
configs' records left out, a seed recorded twice counted once, stand-in rows for steps without
a record, curves from the work dirs, and the table in an (offline) wandb run."""
import csv
import json
from pathlib import Path

import pytest

import benchmark.components  # noqa: F401
from benchmark.names import DEFAULT_PROTOCOLS
from benchmark.suites.plan import plan_suite
from benchmark.suites.report import log_suite_to_wandb, render_suite, suite_records
from benchmark.suites.outcome import Outcome
from benchmark.reports.records import build_record, write_record

SUITE = ("configs = ['configs/mocov2_r18_digits.py', dict(config='configs/mixco_r18_digits.py',"
         " grid={'model.mix_temperature': [0.1]})]\nseeds = [0, 1]\n")
DEFAULT = DEFAULT_PROTOCOLS


@pytest.fixture
def suite(suite_from_text):
    return suite_from_text(SUITE, 'board.py')


def record(run, top1, sha=None, **fields):
    rec = build_record(method=run.info['method'], backbone='resnet18', pretrain_data='digits',
                       pretrain_epochs=30, eval_data='digits', seed=run.seed, world_size=1,
                       total_batch=32, time_s_per_epoch=5.0, peak_memory_gb=1.0,
                       protocols={p: {'metrics': {'top1': top1}} for p in DEFAULT}, **fields)
    return dict(rec, config_sha256=sha or run.config_sha256, setting_sha256=run.setting_sha256,
                overrides=run.overrides)


def test_records_join_runs_by_hash_and_seed(suite):
    moco0, moco1, mix0, mix1 = suite.runs
    old = record(moco0, 10.0)
    new = dict(record(moco0, 20.0), created='9999-01-01T00:00:00')  # the newer of the two
    random = dict(record(moco0, 5.0), method='random_init', pretrain_epochs=0)  # same hash
    records = [old, new, record(mix0, 30.0), record(mix1, 31.0, sha='0' * 64), random, random]
    plans = plan_suite(suite, records)
    out = suite_records(suite, plans, records,
                        {moco1.name: Outcome(moco1, 'failed', ok=False, log='x.log')})
    real = [r for r in out if not r.get('placeholder')]
    assert [(r['method'], r['protocols']['knn']['metrics']['top1'], r.get('variant')) for r in real] == [
        ('random_init', 5.0, None), ('mocov2', 20.0, ''), ('mixco', 30.0, 'model.mix_temperature=0.1')]
    stand_ins = {(r['method'], r['seed']): r for r in out if r.get('placeholder')}
    assert set(stand_ins) == {('mocov2', 1), ('mixco', 1)}
    assert stand_ins['mocov2', 1]['status'] == 'failed'
    assert stand_ins['mocov2', 1]['protocols']['cluster']['metrics'] == {
        'davies_bouldin': 'NA(training failed; log x.log)'}
    assert stand_ins['mixco', 1]['status'] == 'missing'
    assert stand_ins['mixco', 1]['variant'] == 'model.mix_temperature=0.1'
    assert stand_ins['mixco', 1]['overrides'] == {'model.mix_temperature': 0.1}
    assert stand_ins['mixco', 1]['setting_sha256'] == mix1.setting_sha256 == real[2]['setting_sha256']


def test_render_writes_page_csv_and_curves(suite, tmp_path):
    for run, top1 in zip(suite.runs, (40.0, 42.0, 45.0, 44.0)):
        write_record(record(run, top1), suite.results_dir)
        logs = Path(run.work_dir) / '20260101_000000' / 'vis_data'
        logs.mkdir(parents=True)
        (logs / 'scalars.json').write_text('\n'.join(json.dumps({'knn_monitor/top1': v, 'step': e})
                                                     for e, v in ((5, top1 - 5), (10, top1))))
    plans = plan_suite(suite, [])
    paths = render_suite(suite, plans, [], paper=None, use_wandb=False)
    assert [p.name for p in paths] == ['leaderboard.md', 'leaderboard.csv', 'summary.md',
                                       'index.html', 'intervals.png', 'curves.png']
    md, csv_path, summary, _, intervals, curves = paths
    assert curves.stat().st_size > 1000 and intervals.stat().st_size > 1000
    assert '![intervals: ResNet-18 · 30 pretraining epochs · digits](intervals.png)' in \
        summary.read_text()
    assert ('| digits | kNN | MixCo (MoCo-v2) [model.mix_temperature=0.1] | 44.50 range '
            '[44.00, 45.00] (n=2)' in summary.read_text())  # two seeds: the range, under min_seeds
    rows = list(csv.DictReader(csv_path.open()))
    knn = {r['method_label']: r for r in rows if r['protocol'] == 'knn'}
    tau = 'MixCo (MoCo-v2) [model.mix_temperature=0.1]'
    assert set(knn) == {'MoCo-v2', tau}
    assert {r['method'] for r in knn.values()} == {'mocov2', 'mixco'}  # the record names
    assert knn[tau]['top1_mean'] == '44.5'
    assert float(knn[tau]['paired_delta_mean']) == pytest.approx(3.5)
    text = md.read_text()
    assert text.startswith('# Suite board') and '![monitor curves](curves.png)' in text
    assert '| mocov2_r18_digits-s1 | default | 1 | not run |' in text


@pytest.mark.slow
def test_table_goes_to_an_offline_wandb_run(tmp_path, monkeypatch):
    pytest.importorskip('wandb')
    monkeypatch.setenv('WANDB_MODE', 'offline')
    monkeypatch.setenv('WANDB_SILENT', 'true')
    text = 'method,top1_mean\nmocov2,40.0\nmixco,44.5\n'
    run_dir = log_suite_to_wandb('demo', text, None, tmp_path)
    assert run_dir is not None
    tables = list(tmp_path.glob('wandb/offline-run-*/files/media/table/suite/leaderboard_*.table.json'))
    assert len(tables) == 1
    logged = json.loads(tables[0].read_text())
    assert logged['columns'] == ['method', 'top1_mean']
    assert logged['data'] == [['mocov2', '40.0'], ['mixco', '44.5']]
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    assert log_suite_to_wandb('demo', text, None, tmp_path / 'off') is None


def test_render_a_suite_whose_paired_differences_are_all_the_same(rendered_suite):
    """One test image better on each of 7 seeds (+0.28 points on 360 images): the page, the CSV,
    the explorer and every figure are written, and the comparison is decided."""
    paths = rendered_suite['paths']
    assert [p.name for p in paths] == ['leaderboard.md', 'leaderboard.csv', 'summary.md',
                                       'index.html', 'intervals.png', 'profile.png']
    rows = list(csv.DictReader(paths[1].open()))
    knn = next(r for r in rows if r['protocol'] == 'knn' and r['method_label'] == 'MixCo (MoCo-v2)')
    assert knn['verdict'] == 'better'
    assert float(knn['paired_ci_low']) == pytest.approx(rendered_suite['step'])
    assert 'not drawn' not in paths[0].read_text()
