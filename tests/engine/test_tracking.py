"""wandb: offline without credentials, and the evaluation record reaches the run as a table."""
import json
import subprocess
import sys
import textwrap

import pytest
from mmengine.config import Config
from mmengine.visualization import Visualizer

from benchmark.engine.tracking import (
    ROW_COLUMNS,
    configure_wandb,
    log_record,
    record_rows,
    wandb_missing,
    wandb_mode,
)
from tests.conftest import ROOT, needs_wandb

RECORD = dict(id='r1', method='mixco', backbone='resnet18', pretrain_data='digits',
              pretrain_epochs=3, eval_data='digits',
              protocols={'knn': {'settings': {}, 'metrics': {'top1': 91.5, 'top5': 99.0}},
                         'cluster': {'settings': {}, 'metrics': {'davies_bouldin': 'NA(one class)'}}})


@pytest.fixture
def no_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))  # no ~/.netrc
    monkeypatch.delenv('WANDB_API_KEY', raising=False)
    monkeypatch.delenv('WANDB_MODE', raising=False)


def test_offline_with_one_warning_without_credentials(no_credentials):
    mode, warning = wandb_mode()
    assert mode == 'offline' and len(warning.splitlines()) == 1 and 'wandb sync' in warning


def test_online_with_api_key_and_env_mode_wins(no_credentials, monkeypatch):
    monkeypatch.setenv('WANDB_API_KEY', 'x' * 40)
    assert wandb_mode() == ('online', None)
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    assert wandb_mode() == ('disabled', None)


@needs_wandb
def test_configure_sets_mode_project_and_name(no_credentials, tmp_path):
    cfg = Config(dict(work_dir=str(tmp_path / 'mixco_r18_tiny'), visualizer=dict(
        type='Visualizer', vis_backends=[dict(type='LocalVisBackend'),
                                         dict(type='WandbVisBackend')])))
    assert configure_wandb(cfg) is not None
    kwargs = cfg.visualizer.vis_backends[1].init_kwargs
    assert (kwargs.mode, kwargs.project, kwargs.name) == ('offline', 'mixco-bench', 'mixco_r18_tiny')


def test_without_wandb_installed_the_run_logs_locally_with_one_warning(tmp_path, monkeypatch):
    """A machine without wandb (the GPU image has none): the wandb backends are dropped."""
    from benchmark.engine import tracking
    real = tracking.importlib.util.find_spec
    monkeypatch.setattr(tracking.importlib.util, 'find_spec',
                        lambda name, *a: None if name == 'wandb' else real(name, *a))
    cfg = Config(dict(work_dir=str(tmp_path / 'run'), visualizer=dict(
        type='Visualizer', vis_backends=[dict(type='LocalVisBackend'),
                                         dict(type='WandbVisBackend')])))
    monkeypatch.delenv('WANDB_MODE', raising=False)
    warning = configure_wandb(cfg)
    assert len(warning.splitlines()) == 1 and 'wandb is not installed' in warning
    assert cfg.visualizer.vis_backends == [dict(type='LocalVisBackend')]
    monkeypatch.setenv('WANDB_MODE', 'disabled')  # wandb switched off: no warning either
    cfg.visualizer.vis_backends.append(dict(type='WandbVisBackend'))
    assert configure_wandb(cfg) is None
    assert cfg.visualizer.vis_backends == [dict(type='LocalVisBackend')]


def test_record_rows_long_form():
    rows = record_rows(RECORD)
    assert len(rows[0]) == len(ROW_COLUMNS)
    assert ['mixco', 'resnet18', 'digits', 3, 'digits', 'knn', 'top1', 91.5, ''] in rows
    assert ['mixco', 'resnet18', 'digits', 3, 'digits', 'cluster', 'davies_bouldin', None,
            'NA(one class)'] in rows


@pytest.mark.slow
@needs_wandb
def test_log_record_writes_the_table_to_an_offline_run(tmp_path, no_credentials):
    """With a real offline wandb run the record's rows land in the run's logged table."""
    vis = Visualizer(name='wandb-test', save_dir=str(tmp_path), vis_backends=[
        dict(type='WandbVisBackend', init_kwargs=dict(mode='offline', project='t'))])
    vis.add_scalars({'loss': 1.0}, step=1)
    assert log_record(vis, RECORD)
    vis.close()
    tables = list(tmp_path.glob('**/media/table/eval/results_*.table.json'))
    assert len(tables) == 1
    table = json.loads(tables[0].read_text())
    assert table['columns'] == ROW_COLUMNS
    assert ['mixco', 'resnet18', 'digits', 3, 'digits', 'knn', 'top1', 91.5, ''] in table['data']


def test_log_record_without_wandb_backend_is_a_no_op(tmp_path):
    vis = Visualizer(name='local-only', save_dir=str(tmp_path),
                     vis_backends=[dict(type='LocalVisBackend')])
    assert log_record(vis, RECORD) is False


@pytest.mark.slow
@needs_wandb
def test_unreachable_wandb_server_means_one_warning_and_offline(tmp_path, monkeypatch, capsys):
    """Online mode, a key, but nothing listening: the run goes on offline after one warning."""
    monkeypatch.setenv('WANDB_API_KEY', 'a' * 40)
    monkeypatch.setenv('WANDB_BASE_URL', 'http://127.0.0.1:9')  # connection refused
    monkeypatch.delenv('WANDB_MODE', raising=False)
    vis = Visualizer(name='wandb-unreachable', save_dir=str(tmp_path), vis_backends=[
        dict(type='SafeWandbVisBackend', init_kwargs=dict(mode='online', project='t'))])
    vis.add_scalars({'loss': 1.0}, step=1)
    assert log_record(vis, RECORD)
    vis.close()
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith('warning: wandb could not start online')]
    assert len(warnings) == 1
    assert list(tmp_path.glob('**/offline-run-*'))


# -- wandb not installed: simulated in a fresh process, where `import wandb` raises ImportError
BLOCK_WANDB = "import sys\nsys.modules['wandb'] = None  # as if wandb were not installed\n"


def run_without_wandb(code: str, env: dict) -> subprocess.CompletedProcess:
    env = dict(env)
    env.pop('WANDB_MODE', None)  # wandb not switched off: only its absence keeps it out
    return subprocess.run([sys.executable, '-c', BLOCK_WANDB + textwrap.dedent(code)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def wandb_lines(text: str) -> list:
    return [line for line in text.splitlines() if 'wandb' in line.lower()
            and 'WandbVisBackend' not in line]  # the config's own lines name the backend


@pytest.mark.slow
def test_a_training_run_and_a_suite_table_each_say_in_one_line_that_wandb_is_missing(
        tmp_path, subprocess_env):  # (no "wandb" in tmp_path's name: wandb_lines would see it)
    """wandb not installed (one process for both): a training run logs locally after one line,
    and a suite's leaderboard goes to its files after one line; nothing is written for wandb."""
    work_dir = tmp_path / 'run'
    proc = run_without_wandb(f'''
        import methods.base
        from tests.conftest import tiny_backbone
        methods.base.build_resnet = tiny_backbone
        from tools import train
        code = train.main(['configs/mocov2_r18_digits.py', '--work-dir', {str(work_dir)!r},
                           '--no-eval', '--cfg-options', 'train_cfg.max_epochs=1',
                           'train_dataloader.batch_size=128', 'train_dataloader.num_workers=0',
                           'train_dataloader.persistent_workers=False', 'model.queue_size=256'])
        assert code == 0, code
        from pathlib import Path
        from benchmark.suites.report import log_suite_to_wandb
        assert log_suite_to_wandb('demo', 'method,top1\\nmocov2,50.0\\n', None,
                                  Path({str(tmp_path / 'suite')!r})) is None
    ''', subprocess_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(wandb_lines(proc.stdout + proc.stderr)) == sorted([
        wandb_missing('this run logs locally only (scalars.json in the work dir)'),
        wandb_missing("the suite's leaderboard goes to its files only")])
    assert list(work_dir.glob('*/vis_data/scalars.json'))
    assert not list(tmp_path.glob('**/wandb'))
