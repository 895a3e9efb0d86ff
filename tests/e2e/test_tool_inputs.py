"""Every tool meets bad input with one `error:` line on stderr naming the file or option, exit
code 2, in seconds, before any data is read (issue 11): the five classes of malformed config
through train.py and dist_train.sh, bad checkpoints through eval.py and train.py --resume, and
bad paths and numbers through leaderboard.py, prepare_data.py, benchmark_speed.py,
run_suite.py and fault_campaign.py."""
import os
import subprocess
import sys
import time

import pytest
import torch
from torchvision.models import resnet50

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
DIGITS = 'configs/mocov2_r18_digits.py'


def run(cmd, env, timeout=300):
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc, time.monotonic() - start


def tool(name, *args, env):
    return run([sys.executable, f'tools/{name}', *map(str, args)], env)


def one_error_line(result, *words, seconds=120):
    """The tool's stderr is exactly one `error:` line holding `words`; exit code 2."""
    proc, took = result
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith('error: '), proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr and 'usage:' not in proc.stderr
    assert all(str(w) in lines[0] for w in words), (lines[0], words)
    assert took < seconds, took
    return lines[0]


# --- train.py: the five classes of issue 11, each before any data is read --------------------

@pytest.fixture
def nowhere(tmp_path):
    """A data root that does not exist: the config error must come before the data check."""
    return ['--work-dir', str(tmp_path / 'work'), '--cfg-options',
            f'train_dataloader.dataset.data_root={tmp_path / "no_data"}']


@pytest.mark.parametrize('option, words', [
    ('train_cfg.max_epochs=0', ['train_cfg.max_epochs must be >= 1, got 0']),
    ('default_hooks.checkpoint.interval=0', ['default_hooks.checkpoint.interval must be >= 1, '
                                             'or -1 for no periodic checkpoint']),
    ('model.temperature=nan', ['model.temperature must be a finite number, got nan']),
    ('optim_wrapper.optimizer.lr=inf', ['optim_wrapper.optimizer.lr must be a finite number']),
    ('model.queue_size=16', ['model.queue_size (16) must be >= the total batch, 1 process(es) x '
                             'train_dataloader.batch_size 64 = 64']),
])
def test_train_config_value_errors(option, words, nowhere, tmp_path, subprocess_env):
    line = one_error_line(tool('train.py', 'configs/mocov2_r18_tiny.py', *nowhere, option,
                               env=subprocess_env), 'configs/mocov2_r18_tiny.py', *words)
    assert 'no_data' not in line and not (tmp_path / 'work').exists()


def test_train_config_syntax_error_names_file_and_line(tmp_path, subprocess_env):
    config = tmp_path / 'broken.py'
    config.write_text("_base_ = ['%s']\nmodel = dict(type='MoCo',\n    queue_size=64\n"
                      "train_cfg = dict(max_epochs=1)\n" % (ROOT / DIGITS))
    one_error_line(tool('train.py', config, '--work-dir', tmp_path / 'work', env=subprocess_env),
                   f'{config}, line ', 'Python syntax error')
    assert not (tmp_path / 'work').exists()


def test_dist_train_queue_smaller_than_all_processes_batch(tmp_path, subprocess_env):
    """2 processes x 32 > 40: known before training; one line (rank 0 only), exit 2."""
    env = dict(subprocess_env, PYTHON=sys.executable)
    result = run(['bash', 'tools/dist_train.sh', DIGITS, '2', '--work-dir', tmp_path / 'work',
                  '--cfg-options', 'model.queue_size=40', 'train_dataloader.batch_size=32',
                  f'train_dataloader.dataset.data_root={tmp_path / "no_data"}'], env)
    one_error_line(result, 'model.queue_size (40) must be >= the total batch, 2 process(es) x '
                           'train_dataloader.batch_size 32 = 64', seconds=60)
    assert 'ChildFailedError' not in result[0].stderr and not (tmp_path / 'work').exists()
    one_error_line(run(['bash', 'tools/dist_train.sh', DIGITS, 'two'], env),
                   "NUM_PROCS must be a positive integer, got 'two'", seconds=10)


# --- checkpoints: eval.py and train.py --resume ----------------------------------------------

CHECKPOINT_WORDS = {
    'truncated': 'truncated or corrupt', 'empty': 'is empty', 'text': 'not a torch checkpoint',
    'forbidden': 'refusing to load: it asks for posix.system; only weights are loaded',
    'plain_pickle': 'not a torch checkpoint', 'folder': 'is a folder'}


@pytest.mark.parametrize('kind', sorted(CHECKPOINT_WORDS))
def test_eval_refuses_bad_checkpoints(kind, bad_checkpoints, tmp_path, subprocess_env):
    path = bad_checkpoints[kind]
    line = one_error_line(tool('eval.py', DIGITS, path, '--results-dir', tmp_path / 'results',
                               env=subprocess_env), path)
    assert CHECKPOINT_WORDS[kind] in line or kind == 'folder' and 'is a folder' in line, line
    assert not os.path.exists(bad_checkpoints['marker'])  # the pickled os.system never ran
    assert not (tmp_path / 'results').exists()


def test_eval_refuses_a_checkpoint_of_another_architecture(tmp_path, subprocess_env):
    torch.save(resnet50().state_dict(), tmp_path / 'r50.pth')
    one_error_line(tool('eval.py', DIGITS, tmp_path / 'r50.pth', env=subprocess_env),
                   f'checkpoint {tmp_path / "r50.pth"}: checkpoint does not fit the backbone',
                   'first shape mismatch')


@pytest.mark.parametrize('kind', ['truncated', 'forbidden', 'text', 'empty'])
def test_train_resume_refuses_bad_checkpoints(kind, bad_checkpoints, nowhere, subprocess_env):
    path = bad_checkpoints[kind]
    line = one_error_line(tool('train.py', DIGITS, '--resume', path, *nowhere,
                               env=subprocess_env), f'--resume {path}: cannot load it')
    assert CHECKPOINT_WORDS[kind] in line
    assert not os.path.exists(bad_checkpoints['marker'])


def test_train_resume_refuses_a_checkpoint_of_another_model(tmp_path, subprocess_env):
    """Loadable, but not this model's: one line after the model is built, before any data."""
    from methods import MoCo
    other = MoCo(backbone=dict(depth=18), queue_size=64)
    torch.save({'state_dict': other.state_dict(), 'meta': {'epoch': 1}}, tmp_path / 'other.pth')
    one_error_line(tool('train.py', DIGITS, '--resume', tmp_path / 'other.pth',
                               '--work-dir', tmp_path / 'work', '--cfg-options',
                               'train_dataloader.num_workers=0',
                               'train_dataloader.persistent_workers=False',
                               env=dict(subprocess_env, WANDB_MODE='disabled')),
                          f'checkpoint {tmp_path / "other.pth"}: checkpoint does not fit the model',
                          'queue')


# --- every other tool's paths and numbers -----------------------------------------------------

@pytest.fixture
def files(tmp_path):
    (tmp_path / 'a_file').write_text('x\n')
    (tmp_path / 'results' / 'runs').mkdir(parents=True)
    (tmp_path / 'columns.csv').write_text('a,b\n1,2\n')
    (tmp_path / 'binary.csv').write_bytes(b'\x00\xff\xfe\x00garbage')
    return tmp_path


CASES = [
    ('eval.py', ['{tmp}/nope.py', 'random'], ['argument config', 'nope.py not found']),
    ('eval.py', [DIGITS, '{tmp}/nope.pth'], ['argument checkpoint', 'nope.pth not found']),
    ('eval.py', [DIGITS, 'random', '--batch-size', '-1'], ['--batch-size', '>= 1, got -1']),
    ('eval.py', [DIGITS, 'random', '--num-workers', '-2'], ['--num-workers', '>= 0, got -2']),
    ('eval.py', [DIGITS, 'random', '--linear-config', '{tmp}/nope.py'], ['--linear-config']),
    ('eval.py', [DIGITS, 'random', '--results-dir', '{tmp}/a_file'], ['--results-dir', 'a file']),
    ('eval.py', [DIGITS, 'random', '--protocols', 'knn', 'bogus'], ['--protocols', "'bogus'"]),
    ('eval.py', [DIGITS, 'random', '--cfg-options', 'model.temperature=0'],
     [DIGITS, 'model.temperature must be > 0']),
    ('leaderboard.py', ['--results-dir', '{tmp}/nope'], ['--results-dir', 'nope not found']),
    ('leaderboard.py', ['--results-dir', '{tmp}/a_file'], ['--results-dir', 'not a folder']),
    ('leaderboard.py', ['--results-dir', '{tmp}/results', '--paper', '{tmp}/nope.csv'],
     ['--paper', 'nope.csv not found']),
    ('leaderboard.py', ['--results-dir', '{tmp}/results', '--paper', '{tmp}/columns.csv'],
     ['columns.csv', 'missing column(s)']),
    ('leaderboard.py', ['--results-dir', '{tmp}/results', '--paper', '{tmp}/binary.csv'],
     ['--paper', 'binary.csv', 'not a UTF-8']),
    ('leaderboard.py', ['--bogus'], ['unrecognized arguments: --bogus']),
    ('prepare_data.py', ['check', 'tiny', '--root', '{tmp}/nope'], ['{tmp}/nope not found']),
    ('prepare_data.py', ['check', 'folder', '--root', '{tmp}/a_file'], ['{tmp}/a_file']),
    ('prepare_data.py', ['check', 'imagenot', '--root', '{tmp}'], ["'imagenot'"]),
    ('prepare_data.py', ['fetch'], ["argument command: invalid choice: 'fetch'"]),
    ('prepare_data.py', ['check', 'tiny'], ['--root']),
    ('prepare_data.py', ['tiny', '--root', '{tmp}/a_file', '--no-download'],
     ['--root', 'a_file is a file']),
    ('prepare_data.py', ['cifar10', '--root', '{tmp}', '--no-download'],
     ['{tmp}', 'cifar-10-batches-py']),
    ('benchmark_speed.py', ['--batch', '0'], ['need positive sizes', '--batch=0']),
    ('benchmark_speed.py', ['--batch', '5'], ['an even batch', 'got --batch=5']),
    ('benchmark_speed.py', ['--out-dir', '{tmp}/a_file'], ['--out-dir', 'a_file is a file']),
    ('benchmark_speed.py', ['--repeats', '0'], ['need positive sizes', '--repeats=0']),
    ('benchmark_speed.py', ['--knn-k', '-1'], ['need positive sizes', '--knn-k=-1']),
    ('benchmark_speed.py', ['--input-size', 'big'], ['--input-size', "invalid int value: 'big'"]),
    ('benchmark_speed.py', ['--num-workers', '-1'], ['--num-workers', '>= 0, got -1']),
    ('benchmark_speed.py', ['--out', '{tmp}/nope/s.json'], ['--out', 'nope not found']),
    ('benchmark_speed.py', ['--table', '{tmp}'], ['--table', 'is a folder']),
    ('run_suite.py', ['{tmp}/nope.py', '--dry-run'], ['nope.py not found']),
    ('run_suite.py', ['demo_digits', '--seeds', '-1'], ['--seeds', '>= 0, got -1']),
    ('run_suite.py', ['demo_digits', '--paper', '{tmp}/nope.csv'], ['--paper', 'not found']),
    ('run_suite.py', ['demo_digits', '--work-root', '{tmp}/a_file'], ['--work-root', 'a file']),
    ('fault_campaign.py', ['--out', '{tmp}/a_file'], ['--out', 'a_file is a file']),
    ('fault_campaign.py', ['--seed', '-1'], ['--seed', '>= 0, got -1']),
]


@pytest.mark.parametrize('name, args, words', CASES,
                         ids=[f'{c[0]}:{" ".join(c[1])}' for c in CASES])
def test_tool_bad_input_is_one_line(name, args, words, files, subprocess_env):
    fill = [a.replace('{tmp}', str(files)) for a in args]
    one_error_line(tool(name, *fill, env=subprocess_env),
                   *[w.replace('{tmp}', str(files)) for w in words])
