"""tools/train.py (and the check tools/dist_train.sh runs before it starts any process) meets
bad input with one `error:` line naming the config, exit code 2, before any data is read: the
malformed config values and syntax, the queue too small for every process's batch, and bad
--resume checkpoints. In-process; tests/e2e/test_tool_inputs.py runs each tool once for real."""
import os
import subprocess

import pytest
import torch

from tests.conftest import ROOT
from tools import train

DIGITS = 'configs/mocov2_r18_digits.py'
TINY_CONFIG = 'configs/mocov2_r18_tiny.py'


@pytest.fixture
def nowhere(tmp_path):
    """A data root that does not exist: the config error must come before the data check."""
    return ['--work-dir', str(tmp_path / 'work'), '--cfg-options',
            f'train_dataloader.dataset.data_root={tmp_path / "no_data"}']


@pytest.mark.parametrize('option, words', [
    ('train_cfg.max_epochs=0', ['train_cfg.max_epochs must be >= 1, got 0']),
    ('default_hooks.checkpoint.interval=0', ['default_hooks.checkpoint.interval=0 refused by '
                                             'SafeCheckpointHook: interval must be >= 1, or -1 '
                                             'for no periodic checkpoint']),
    ('model.temperature=nan', ['model.temperature must be a finite number, got nan']),
    ('optim_wrapper.optimizer.lr=inf', ['optim_wrapper.optimizer.lr must be a finite number']),
    ('model.queue_size=16', ['model.queue_size (16) must be >= the total batch, 1 process(es) x '
                             'train_dataloader.batch_size 64 = 64']),
])
def test_train_config_value_errors(option, words, nowhere, tmp_path, one_error_line):
    line = one_error_line(train, TINY_CONFIG, *nowhere, option, words=[TINY_CONFIG, *words])
    assert 'no_data' not in line and not (tmp_path / 'work').exists()


def test_train_config_syntax_error_names_file_and_line(tmp_path, one_error_line):
    config = tmp_path / 'broken.py'
    config.write_text("_base_ = ['%s']\nmodel = dict(type='MoCo',\n    queue_size=64\n"
                      "train_cfg = dict(max_epochs=1)\n" % (ROOT / DIGITS))
    one_error_line(train, config, '--work-dir', tmp_path / 'work',
                   words=[f'{config}, line ', 'Python syntax error'])
    assert not (tmp_path / 'work').exists()


def test_dist_train_check_queue_smaller_than_all_processes_batch(tmp_path, monkeypatch,
                                                                 one_error_line):
    """2 processes x 32 > 40: what tools/dist_train.sh runs before it starts the processes
    (train.py --check-only with torchrun's WORLD_SIZE); one line, exit 2."""
    monkeypatch.setenv('WORLD_SIZE', '2')
    one_error_line(train, DIGITS, '--check-only', '--work-dir', tmp_path / 'work',
                   '--cfg-options', 'model.queue_size=40', 'train_dataloader.batch_size=32',
                   f'train_dataloader.dataset.data_root={tmp_path / "no_data"}',
                   words=['model.queue_size (40) must be >= the total batch, 2 process(es) x '
                          'train_dataloader.batch_size 32 = 64'])
    assert not (tmp_path / 'work').exists()


def test_dist_train_refuses_a_bad_process_count(subprocess_env):
    """The script's own check, before it starts Python."""
    proc = subprocess.run(['bash', 'tools/dist_train.sh', DIGITS, 'two'], cwd=ROOT,
                          env=dict(subprocess_env, PYTHON='false'), capture_output=True,
                          text=True, timeout=10)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: NUM_PROCS must be a positive integer, got 'two'"]


CHECKPOINT_WORDS = {
    'truncated': 'truncated or corrupt', 'empty': 'is empty', 'text': 'not a torch checkpoint',
    'forbidden': 'refusing to load: it asks for posix.system; only weights are loaded'}


@pytest.mark.parametrize('kind', sorted(CHECKPOINT_WORDS))
def test_train_resume_refuses_bad_checkpoints(kind, bad_checkpoints, nowhere, one_error_line):
    path = bad_checkpoints[kind]
    line = one_error_line(train, DIGITS, '--resume', path, *nowhere,
                          words=[f'--resume {path}: cannot load it'])
    assert CHECKPOINT_WORDS[kind] in line
    assert not os.path.exists(bad_checkpoints['marker'])


def test_train_resume_refuses_a_checkpoint_of_another_model(tmp_path, one_error_line):
    """Loadable, but not this model's: one line after the model is built, before any data."""
    from methods import MoCo
    other = MoCo(backbone=dict(depth=18), queue_size=64)
    torch.save({'state_dict': other.state_dict(), 'meta': {'epoch': 1}}, tmp_path / 'other.pth')
    one_error_line(train, DIGITS, '--resume', tmp_path / 'other.pth',
                   '--work-dir', tmp_path / 'work', '--cfg-options',
                   'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
                   words=[f'checkpoint {tmp_path / "other.pth"}: checkpoint does not fit the model',
                          'queue'])
