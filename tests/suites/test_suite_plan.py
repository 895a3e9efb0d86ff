"""What a suite still has to do, decided from records and tiny fake work dirs: skip what has a
record for the run's config hash, seed and evaluation; resume what has checkpoints; start the
rest; wait for a queued SLURM job; refuse a work dir of another config."""
import json
from pathlib import Path

import pytest

import benchmark.components  # noqa: F401
from benchmark.suites.suite import run_suite, select
from benchmark.suites.plan import (index_records, mark_work_dir, plan_lines, plan_run,
                                          plan_suite)
from benchmark.suites.spec import SuiteError, expand_suite
from benchmark.layout import LAST_CHECKPOINT, SLURM_JOB_FILE
from benchmark.names import DEFAULT_PROTOCOLS
from benchmark.reports.records import build_record, write_record

SUITE = ("configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']\n"
         "seeds = [0, 1]\nevaluations = ['default', 'linear_paper', "
         "dict(protocols=['knn'], eval_data='digits')]\n")


@pytest.fixture
def suite(suite_from_text):
    return suite_from_text(SUITE, 'plan.py')


def record(run, protocols, status='ok', seed=None, sha=None, eval_data='digits'):
    """A record as tools/train.py or tools/eval.py would write it for `run`."""
    rec = build_record(method=run.info['method'], backbone='resnet18', pretrain_data='digits',
                       pretrain_epochs=30, eval_data=eval_data, seed=run.seed if seed is None else seed,
                       world_size=2, total_batch=64, status=status,
                       protocols={p: {'settings': {}, 'metrics': {'top1': 50.0}} for p in protocols})
    rec['config_sha256'] = sha or run.config_sha256
    return rec


DEFAULT = list(DEFAULT_PROTOCOLS)


def test_nothing_done_starts_everything(suite):
    plans = plan_suite(suite, [])
    assert [p.train for p in plans] == ['start'] * 4
    assert plans[0].evals == {'linear_paper': 'todo', 'knn@digits': 'todo'}


def test_records_decide_per_evaluation(suite):
    run0, run1, run2, run3 = suite.runs
    records = [record(run0, DEFAULT), record(run0, ['linear_paper']),
               record(run0, ['knn'], status='ok'),  # the knn@digits evaluation too
               record(run1, DEFAULT),
               record(run2, DEFAULT, seed=7),  # another seed: not this run's
               record(run3, DEFAULT, sha='0' * 64),  # another config: not this run's
               record(run3, ['linear_paper'], status='diverged'),
               dict(record(run2, DEFAULT), method='random_init')]  # tools/eval.py CONFIG random
    plans = plan_suite(suite, records)
    assert (plans[0].train, plans[0].evals) == ('done', {'linear_paper': 'done', 'knn@digits': 'done'})
    assert not plans[0].has_work
    assert (plans[1].train, plans[1].evals) == ('done', {'linear_paper': 'todo', 'knn@digits': 'done'})
    assert plans[2].train == 'start'
    assert (plans[3].train, plans[3].evals) == ('diverged', {'linear_paper': 'skip', 'knn@digits': 'skip'})


def test_a_record_of_another_setting_of_the_same_config_is_not_the_runs(suite):
    """The config hash leaves out the number of processes: a record of the same config and
    seed trained with another number (another setting) does not count; one of the run's own
    setting does, and a record without a setting (written before settings) still does."""
    run0, run1 = suite.runs[:2]
    assert run0.setting_sha256
    other = dict(record(run0, DEFAULT), setting_sha256='f' * 64, world_size=1)
    own = dict(record(run1, DEFAULT), setting_sha256=run1.setting_sha256)
    plans = plan_suite(suite, [other, own, record(suite.runs[2], DEFAULT)])
    assert plans[0].train == 'start'
    assert plans[1].train == 'done' and plans[2].train == 'done'


def test_checkpoints_without_record_resume_from_the_newest(suite):
    run = suite.runs[2]
    work = Path(run.work_dir)
    work.mkdir(parents=True)
    for name in ('epoch_1.pth', 'epoch_2.pth', '.epoch_3.pth.tmp'):
        (work / name).write_bytes(b'x')
    (work / LAST_CHECKPOINT).write_text(str(work / 'epoch_2.pth'))
    plan = plan_run(run, suite, {})
    assert (plan.train, plan.checkpoint) == ('resume', str(work / 'epoch_2.pth'))
    # Its record arrives: done, whatever the work dir holds.
    assert plan_run(run, suite, index_records([record(run, DEFAULT)])).train == 'done'


def test_queued_slurm_job_waits(suite):
    run = suite.runs[0]
    Path(run.work_dir).mkdir(parents=True)
    (Path(run.work_dir) / SLURM_JOB_FILE).write_text('4242\n')
    asked = []
    plan = plan_run(run, suite, {}, queued=lambda work, name: asked.append((work, name)) or '42')
    assert (plan.train, plan.job, asked) == ('queued', '42', [(run.work_dir, suite.name)])
    assert plan.evals == {'linear_paper': 'queued', 'knn@digits': 'queued'}
    assert plan_run(run, suite, {}, queued=lambda work, name: None).train == 'start'


def test_work_dir_of_another_config_is_refused(suite):
    run = suite.runs[0]
    mark_work_dir(run)
    (Path(run.work_dir) / 'epoch_1.pth').write_bytes(b'x')
    assert plan_run(run, suite, {}).train == 'resume'
    marker = Path(run.work_dir) / 'suite_run.json'
    marker.write_text(json.dumps(dict(json.loads(marker.read_text()), config_sha256='f' * 64)))
    with pytest.raises(SuiteError, match='holds checkpoints of another config'):
        plan_run(run, suite, {})


def test_without_default_evaluation_the_final_checkpoint_means_trained(tmp_path):
    path = tmp_path / 'noeval.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\nevaluations = ['linear_paper']\n")
    suite = expand_suite(str(path), work_root=str(tmp_path / 'w'))
    run = suite.runs[0]
    Path(run.work_dir).mkdir(parents=True)
    (Path(run.work_dir) / 'epoch_29.pth').write_bytes(b'x')
    assert plan_run(run, suite, {}).train == 'resume'
    (Path(run.work_dir) / 'epoch_30.pth').write_bytes(b'x')
    plan = plan_run(run, suite, {})
    assert (plan.train, plan.evals) == ('done', {'linear_paper': 'todo'})


def test_plan_lines_and_dry_run(suite, tmp_path):
    run0, run1 = suite.runs[:2]
    (Path(run1.work_dir)).mkdir(parents=True)
    (Path(run1.work_dir) / 'iter_200.pth').write_bytes(b'x')
    write_record(record(run0, DEFAULT), suite.results_dir)
    lines = plan_lines(suite, plan_suite(suite, [record(run0, DEFAULT)]))
    assert lines[0].startswith('[1/4] mocov2_r18_digits-s0') and 'train: skip (done)' in lines[0]
    assert 'linear_paper: todo' in lines[0]
    assert 'train: resume from iter_200.pth' in lines[1] and 'train: start' in lines[2]
    assert lines[-1] == 'plan: 1 skip (done), 1 resume, 2 start; 7 evaluation(s) to run'
    out = []
    code = run_suite(str(tmp_path / 'plan.py'), dry_run=True, only='mocov2',
                     results_root=str(tmp_path / 'results'), work_root=str(tmp_path / 'work'),
                     out=lambda *a, **k: out.append(' '.join(map(str, a))))
    assert code == 0 and "--only 'mocov2': 2 run(s)" in out[0]
    assert [line.split()[1] for line in out[1:-1]] == ['mocov2_r18_digits-s0', 'mocov2_r18_digits-s1']
    assert 'train: skip (done)' in out[1] and 'train: resume' in out[2]
    assert not (Path(suite.results_dir) / 'leaderboard.md').exists()  # a dry run writes nothing


def test_only_selects_by_glob_or_substring(suite):
    assert select(suite, 'mixco') == ['mixco_r18_digits-s0', 'mixco_r18_digits-s1']
    assert select(suite, '*-s1') == ['mocov2_r18_digits-s1', 'mixco_r18_digits-s1']
    with pytest.raises(SuiteError, match="--only 'simclr' matches none of the 4 runs"):
        select(suite, 'simclr')
