"""End to end: tools/train.py and tools/dist_train.sh on tiny generated data, CPU processes."""
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmark.engine.compat import allow_mmengine_checkpoints
from tests.conftest import ROOT

TINY = ['train_dataloader.batch_size=8', 'train_dataloader.dataset.input_size=32',
        'train_cfg.max_epochs=1', 'model.queue_size=64', 'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False']


def logged_scalars(work_dir: Path) -> list:
    """The per-iteration scalars mmengine wrote to vis_data/scalars.json."""
    files = list(work_dir.glob('*/vis_data/scalars.json'))
    assert files, f'no scalars.json under {work_dir}'
    return [json.loads(line) for line in files[0].read_text().splitlines()]


@pytest.mark.slow
def test_dist_train_two_cpu_processes(tmp_path, fake_tiny, free_port, subprocess_env):
    """The issue's command: 2 gloo processes finish, leave a checkpoint, losses are finite."""
    work_dir = tmp_path / 'work_dirs' / 'mixco_r18_tiny'
    cmd = ['bash', str(ROOT / 'tools/dist_train.sh'), 'configs/mixco_r18_tiny.py', '2',
           '--cfg-options', f'train_dataloader.dataset.data_root={fake_tiny}',
           f'work_dir={work_dir}', 'default_hooks.logger.interval=1', *TINY,
           '--results-dir', str(tmp_path / 'results')]
    env = dict(subprocess_env, PORT=str(free_port), PYTHON=sys.executable, HOME=str(tmp_path))
    env.pop('WANDB_MODE')  # no credentials in this HOME: wandb must fall back to offline
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (work_dir / 'epoch_1.pth').is_file()
    rows = [r for r in logged_scalars(work_dir) if 'loss' in r]
    assert rows and all(math.isfinite(r[k]) for r in rows for k in ('loss', 'loss_inst', 'loss_mix'))
    assert 'Distributed training: True' in proc.stdout + proc.stderr
    records = list((tmp_path / 'results' / 'runs').glob('*.json'))
    assert len(records) == 1  # rank 0 alone writes the end-of-training evaluation
    record = json.loads(records[0].read_text())
    assert (record['method'], record['world_size'], record['total_batch']) == ('mixco', 2, 16)
    assert set(record['protocols']) == {'knn', 'linear_fast', 'cluster', 'cluster_tsne'}
    assert (records[0].with_suffix('') / 'tsne.png').is_file()
    if importlib.util.find_spec('wandb') is None:  # a GPU image: local logs, one warning
        assert proc.stderr.count('wandb is not installed') == 1
        return
    assert proc.stderr.count('wandb has no credentials') == 1
    tables = list(work_dir.glob('**/wandb/offline-run-*/files/media/table/eval/*.table.json'))
    assert len(tables) == 1  # the evaluation reached the training's (offline) wandb run
    logged = json.loads(tables[0].read_text())['data']
    assert ['mixco', 'resnet18', 'tiny-imagenet', 1, 'tiny-imagenet', 'knn', 'top1',
            record['protocols']['knn']['metrics']['top1'], ''] in logged


@pytest.mark.slow
def test_train_then_resume_loads_weights_only(tmp_path, fake_tiny, subprocess_env):
    """One process trains an epoch, then --resume continues from the checkpoint (mmengine#1655)."""
    base = [sys.executable, 'tools/train.py', 'configs/mocov2_r18_tiny.py', '--work-dir',
            str(tmp_path), '--no-eval', '--cfg-options', f'train_dataloader.dataset.data_root={fake_tiny}',
            *TINY]
    first = subprocess.run(base, cwd=ROOT, env=subprocess_env, capture_output=True, text=True,
                           timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    second = subprocess.run(base[:-len(TINY)] + [t.replace('max_epochs=1', 'max_epochs=2')
                                                 for t in TINY] + ['--resume'],
                            cwd=ROOT, env=subprocess_env, capture_output=True, text=True,
                            timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert 'resumed epoch: 1' in second.stdout + second.stderr
    allow_mmengine_checkpoints()
    ckpt = torch.load(tmp_path / 'epoch_2.pth', map_location='cpu')  # weights_only=True
    assert ckpt['meta']['epoch'] == 2
    assert ckpt['state_dict']['queue'].shape == (64, 128)  # the queue travels with the weights


def test_missing_data_root_is_one_line_error(tmp_path, subprocess_env):
    """A missing dataset root fails fast with one line naming the path and prepare_data.py."""
    missing = tmp_path / 'nowhere'
    proc = subprocess.run([sys.executable, 'tools/train.py', 'configs/mixco_r18_tiny.py',
                           '--cfg-options', f'train_dataloader.dataset.data_root={missing}'],
                          cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error:'), proc.stderr
    assert str(missing) in lines[0] and 'prepare_data.py' in lines[0]


@pytest.mark.parametrize('option, words', [
    ('train_dataloader.dataset.view=bogus', 'unknown view'),
    ('model.temperature=-1', 'temperature must be > 0'),
    ('model.mix_pairing=random', 'mix_pairing'),
    ('model.key_momentum=1.5', 'key_momentum'),
])
def test_bad_option_is_one_line_error(option, words, subprocess_env):
    """A bad value fails before training with one line naming it, exit code 2."""
    proc = subprocess.run([sys.executable, 'tools/train.py', 'configs/mixco_r18_digits.py',
                           '--cfg-options', option, 'model.queue_size=64'],
                          cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error:') and words in lines[0], proc.stderr
