"""A suite that reuses another (``reuse = ['a']``): its records are read from both results
folders (oldest first), a run with a record of the same config hash and seed in the other
suite's folder is not trained again, and its curves are looked up in the other suite's work dir.
A bad ``reuse`` is one line. Records are fabricated; nothing trains."""
import json
from pathlib import Path

import pytest

import benchmark.components  # noqa: F401
from benchmark.names import DEFAULT_PROTOCOLS
from benchmark.reports.records import build_record, write_record
from benchmark.suites.plan import plan_suite
from benchmark.suites.report import read_suite_records
from benchmark.suites.spec import SuiteError
from benchmark.suites.suite import run_suite

CONFIG = "configs = ['configs/mocov2_r18_digits.py']\n"
DEFAULT = list(DEFAULT_PROTOCOLS)


def record(run, seed=None, created=None, protocols=DEFAULT):
    """A record as tools/train.py would write it for `run` (its config hash and seed)."""
    rec = build_record(method=run.info['method'], backbone='resnet18', pretrain_data='digits',
                       pretrain_epochs=30, eval_data='digits',
                       seed=run.seed if seed is None else seed, world_size=1, total_batch=32,
                       protocols={p: {'settings': {}, 'metrics': {'top1': 50.0}}
                                  for p in protocols})
    rec['config_sha256'] = run.config_sha256
    if created:
        rec['created'] = created
    return rec


@pytest.fixture
def reusing(suite_from_text):
    """Suite 'b' (seeds 0 and 1) reusing suite 'a'."""
    return suite_from_text(CONFIG + "seeds = [0, 1]\nreuse = ['a']\n", 'b.py')


def test_reuse_expands_to_the_other_suites_folders(reusing, suite_from_text, tmp_path):
    results, work = tmp_path / 'results' / 'suites', tmp_path / 'work' / 'suites'
    assert reusing.reused == [(str(results / 'a'), str(work / 'a'))]
    assert reusing.record_dirs == [str(results / 'b'), str(results / 'a')]
    run = reusing.runs[0]
    assert reusing.work_dirs(run) == [str(work / 'b' / run.name), str(work / 'a' / run.name)]
    # The same run in suite 'a' has this run's name and config hash: its work dir is the one.
    other = suite_from_text(CONFIG + "seeds = [0]\n", 'a.py')
    assert other.runs[0].name == run.name and other.runs[0].config_sha256 == run.config_sha256
    assert reusing.work_dirs(run)[1] == other.runs[0].work_dir
    assert (other.reused, other.record_dirs) == ([], [other.results_dir])
    two = suite_from_text(CONFIG + "reuse = ('a', 'c')\n", 'd.py')
    assert two.record_dirs == [str(results / 'd'), str(results / 'a'), str(results / 'c')]


@pytest.mark.parametrize('reuse', [
    "'a'",            # a string, not a list
    "['b']",          # the suite itself (its name is its file's stem)
    "['x/a']",        # a path, not a suite's name
    "['..']",         # would point above the suites' folder
    "['.hidden']",
    "['a', 'a']",     # twice
    "[3]",
    "5",
    "dict(a=1)",
])
def test_bad_reuse_is_one_line(suite_from_text, reuse):
    with pytest.raises(SuiteError) as info:
        suite_from_text(CONFIG + f"reuse = {reuse}\n", 'b.py')
    message = str(info.value)
    assert 'reuse must be a list of other suites' in message and '\n' not in message
    assert 'b.py' in message


def test_reuse_of_its_own_name_given_in_the_file(suite_from_text):
    with pytest.raises(SuiteError, match='reuse must be a list'):
        suite_from_text(CONFIG + "name = 'mine'\nreuse = ['mine']\n", 'b.py')


def test_a_record_in_the_reused_folder_means_trained(reusing):
    run0, run1 = reusing.runs
    other_results = reusing.reused[0][0]
    write_record(record(run0), other_results)
    write_record(record(run1, seed=7), other_results)  # another seed: not run1's
    own = plan_suite(reusing, read_suite_records(reusing.results_dir))
    assert [p.train for p in own] == ['start', 'start']  # its own folder has nothing
    plans = plan_suite(reusing, read_suite_records(reusing.record_dirs))
    assert [p.train for p in plans] == ['done', 'start']
    assert not plans[0].has_work


def test_dry_run_skips_the_reused_run(reusing, tmp_path):
    write_record(record(reusing.runs[0]), reusing.reused[0][0])
    out = []
    code = run_suite(str(tmp_path / 'b.py'), dry_run=True, results_root=str(tmp_path / 'results'),
                     work_root=str(tmp_path / 'work'),
                     out=lambda *a, **k: out.append(' '.join(map(str, a))))
    assert code == 0
    lines = {line.split()[1]: line for line in out if line.startswith('[')}
    assert 'train: skip (done)' in lines['mocov2_r18_digits-s0']
    assert 'train: start' in lines['mocov2_r18_digits-s1']
    assert not Path(reusing.results_dir).exists()  # a dry run writes nothing


def test_reusing_a_suite_that_never_ran_trains_everything(reusing):
    assert not Path(reusing.reused[0][0]).exists()
    assert read_suite_records(reusing.record_dirs) == []
    assert [p.train for p in plan_suite(reusing, [])] == ['start', 'start']


def test_read_suite_records_over_folders_is_oldest_first(reusing, tmp_path, capsys):
    run = reusing.runs[0]
    mine, theirs = reusing.results_dir, reusing.reused[0][0]
    newest = write_record(record(run, created='2026-01-03T00:00:00+00:00'), mine)
    oldest = write_record(record(run, created='2026-01-01T00:00:00+00:00'), theirs)
    middle = write_record(record(run, created='2026-01-02T00:00:00+00:00'), mine)
    (Path(theirs) / 'runs' / 'broken.json').write_text('{not json')
    records = read_suite_records([mine, theirs])
    ids = [json.loads(p.read_text())['id'] for p in (oldest, middle, newest)]
    assert [r['id'] for r in records] == ids
    assert 'warning: skipping' in capsys.readouterr().err  # the broken file: a line, no stop
    assert [r['id'] for r in read_suite_records(mine)] == ids[1:]  # one folder, as a string
