"""benchmark.layout: the documented paths of a run, its records and the leaderboard."""
import os
import os.path as osp
from pathlib import Path

from benchmark import layout


def test_repo_root_is_the_checkout():
    assert (layout.REPO_ROOT / 'configs').is_dir() and (layout.REPO_ROOT / 'tools').is_dir()
    assert (layout.REPO_ROOT / 'benchmark' / 'layout.py').is_file()
    assert layout.CONFIG_DIR == layout.REPO_ROOT / 'configs'
    assert layout.EVAL_CONFIG_DIR == layout.REPO_ROOT / 'configs' / 'eval'
    assert layout.PAPER_RESULTS == layout.REPO_ROOT / 'results' / 'paper_results.csv'
    assert layout.PAPER_RESULTS.is_file()


def test_work_dir_paths():
    assert layout.config_stem('configs/mixco_r18_tiny.py') == 'mixco_r18_tiny'
    assert layout.config_stem('/abs/a.b.py') == 'a.b'
    assert layout.default_work_dir('configs/mixco_r18_tiny.py') == osp.join('work_dirs',
                                                                             'mixco_r18_tiny')
    assert layout.epoch_checkpoint('work_dirs/x', 7) == osp.join('work_dirs/x', 'epoch_7.pth')
    assert layout.ITER_CHECKPOINT.format(200) == 'iter_200.pth'
    assert (layout.LAST_CHECKPOINT, layout.PREEMPTED_MARKER, layout.WANDB_RUN_ID_FILE,
            layout.TSNE_FIGURE, layout.SCAN_CACHE) == (
        'last_checkpoint', 'preempted', 'wandb_run_id', 'tsne.png', '.image_scan.json')


def test_results_paths():
    assert layout.records_dir('res') == Path('res/runs')
    assert layout.record_path('res', '2024-x') == Path('res/runs/2024-x.json')
    assert layout.run_folder('res', '2024-x') == Path('res/runs/2024-x')
    assert layout.run_folder('res', 'a') / layout.REPORT == Path('res/runs/a/report.md')
    assert layout.leaderboard_paths('res') == (Path('res/leaderboard.md'),
                                               Path('res/leaderboard.csv'))
    assert layout.RESULTS_DIR == 'results'


def test_suite_paths():
    assert layout.SUITE_CONFIG_DIR == layout.CONFIG_DIR / 'suites'
    assert layout.suite_config('demo_digits') == layout.SUITE_CONFIG_DIR / 'demo_digits.py'
    assert layout.suite_config('x/my_suite.py') == Path('x/my_suite.py')
    assert layout.suite_results_dir('demo') == Path('results/suites/demo')
    assert layout.suite_results_dir('demo', '/r') == Path('/r/suites/demo')
    assert layout.suite_work_dir('demo', 'mixco_r18_digits-s0') == Path(
        'work_dirs/suites/demo/mixco_r18_digits-s0')
    assert (layout.SUITE_RUN_FILE, layout.SUITE_TRAIN_LOG, layout.SUITE_EVAL_LOG.format('knn'),
            layout.SLURM_JOB_FILE, layout.SUITE_CURVES) == (
        'suite_run.json', 'suite_train.log', 'suite_eval_knn.log', 'slurm_job_id', 'curves.png')


def test_import_path_puts_the_checkout_first_and_keeps_the_rest(tmp_path):
    root, site = str(layout.REPO_ROOT), str(tmp_path / 'site')
    assert layout.import_path({}) == root
    assert layout.import_path({'PYTHONPATH': ''}) == root
    assert layout.import_path({'PYTHONPATH': site}) == os.pathsep.join([root, site])
