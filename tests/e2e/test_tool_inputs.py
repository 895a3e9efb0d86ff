"""Every tool, run as a real process once, meets bad input with exactly one `error:` line on
stderr, exit code 2, no traceback, in seconds, before any data is read: train.py, dist_train.sh,
eval.py, leaderboard.py, prepare_data.py, benchmark_speed.py, run_suite.py, fault_campaign.py
and kill_resume.py. Each kind of bad input is checked in-process in tests/tools/."""
import os
import subprocess
import sys
import time

import torch

from tests.conftest import ROOT

DIGITS = 'configs/mocov2_r18_digits.py'


def run(cmd, env, timeout=300):
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc, time.monotonic() - start


def tool(name, *args, env):
    return run([sys.executable, f'tools/{name}', *map(str, args)], env)


def one_error_line(result, *words):
    """The tool's stderr is exactly one `error:` line holding `words`; exit code 2."""
    proc, _ = result
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith('error: '), proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr and 'usage:' not in proc.stderr
    assert all(str(w) in lines[0] for w in words), (lines[0], words)
    return lines[0]


def test_train_resume_refuses_a_checkpoint_of_another_model(tmp_path, subprocess_env):
    """Loadable, but not this model's: one line after the model is built, before any data."""
    from methods import MoCo
    other = MoCo(backbone=dict(depth=18), queue_size=64)
    torch.save({'state_dict': other.state_dict(), 'meta': {'epoch': 1}}, tmp_path / 'other.pth')
    one_error_line(tool('train.py', DIGITS, '--resume', tmp_path / 'other.pth',
                        '--work-dir', tmp_path / 'work', '--cfg-options',
                        'train_dataloader.num_workers=0',
                        'train_dataloader.persistent_workers=False', env=subprocess_env),
                   f'checkpoint {tmp_path / "other.pth"}: checkpoint does not fit the model',
                   'queue')


def test_dist_train_queue_smaller_than_all_processes_batch(tmp_path, subprocess_env):
    """2 processes x 32 > 40: known before training; one line (rank 0 only), exit 2."""
    env = dict(subprocess_env, PYTHON=sys.executable)
    result = run(['bash', 'tools/dist_train.sh', DIGITS, '2', '--work-dir', tmp_path / 'work',
                  '--cfg-options', 'model.queue_size=40', 'train_dataloader.batch_size=32',
                  f'train_dataloader.dataset.data_root={tmp_path / "no_data"}'], env)
    one_error_line(result, 'model.queue_size (40) must be >= the total batch, 2 process(es) x '
                           'train_dataloader.batch_size 32 = 64')
    assert 'ChildFailedError' not in result[0].stderr and not (tmp_path / 'work').exists()


def test_dist_train_unknown_argument_is_train_pys_line(tmp_path, subprocess_env):
    """An argument tools/train.py does not take: its usage error, named as train.py's, exit 2,
    before torchrun starts."""
    result = run(['bash', 'tools/dist_train.sh', DIGITS, '2', '--work-dir', tmp_path / 'work',
                  '--no-evaluation'], dict(subprocess_env, PYTHON=sys.executable))
    assert result[0].returncode == 2
    assert result[0].stderr.splitlines() == [
        'error: train.py: unrecognized arguments: --no-evaluation']
    assert not (tmp_path / 'work').exists()


def test_eval_refuses_a_checkpoint_that_asks_for_code(bad_checkpoints, tmp_path, subprocess_env):
    path = bad_checkpoints['forbidden']
    line = one_error_line(tool('eval.py', DIGITS, path, '--results-dir', tmp_path / 'results',
                               env=subprocess_env), path)
    assert 'refusing to load: it asks for posix.system; only weights are loaded' in line
    assert not os.path.exists(bad_checkpoints['marker'])  # the pickled os.system never ran
    assert not (tmp_path / 'results').exists()


def test_leaderboard_paper_csv_without_its_columns(tmp_path, subprocess_env):
    (tmp_path / 'runs').mkdir()
    (tmp_path / 'columns.csv').write_text('a,b\n1,2\n')
    one_error_line(tool('leaderboard.py', '--results-dir', tmp_path, '--paper',
                        tmp_path / 'columns.csv', env=subprocess_env),
                   'columns.csv', 'missing column(s)')


def test_prepare_data_folder_without_the_data(tmp_path, subprocess_env):
    one_error_line(tool('prepare_data.py', 'cifar10', '--root', tmp_path, '--no-download',
                        env=subprocess_env), tmp_path, 'cifar-10-batches-py')


def test_benchmark_speed_odd_batch(subprocess_env):
    line = one_error_line(tool('benchmark_speed.py', '--batch', '5', env=subprocess_env),
                          'an even batch', 'got --batch=5')
    assert line.startswith('error: benchmark_speed: ')


def test_run_suite_bad_suite_file(tmp_path, subprocess_env):
    bad = tmp_path / 'tiny.py'
    bad.write_text("configs = [dict(config='configs/mixco_r18_digits.py', "
                   "grid={'model.mix_temprature': [0.1]})]\n")
    result = tool('run_suite.py', bad, '--dry-run', env=subprocess_env)
    line = one_error_line(result, "unknown key 'model.mix_temprature'")
    assert line.startswith('error: suite ') and result[0].stdout == ''


def test_fault_campaign_negative_seed(subprocess_env):
    one_error_line(tool('fault_campaign.py', '--seed', '-1', env=subprocess_env),
                   '--seed', '>= 0, got -1')


def test_kill_resume_bad_config_value(tmp_path, subprocess_env):
    one_error_line(tool('kill_resume.py', 'configs/mixco_r18_tiny_fast.py', '--kill-at', '3',
                        '--work-dir', tmp_path / 'work', '--cfg-options', 'model.queue_size=-1',
                        env=subprocess_env), 'configs/mixco_r18_tiny_fast.py', 'queue_size')
    assert not (tmp_path / 'work').exists()
