"""End to end: tools/dist_train.sh on tiny generated data, two CPU processes, evaluated and logged.
A SIGKILL and --resume through tools/train.py and tools/dist_train.sh: tests/e2e/test_faults.py;
bad options and a missing data root as one line: tests/engine/config/test_config_check.py."""
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path


from tests.conftest import ROOT

TINY = ['train_dataloader.batch_size=8', 'train_dataloader.dataset.input_size=32',
        'train_cfg.max_epochs=1', 'model.queue_size=64', 'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False']


def logged_scalars(work_dir: Path) -> list:
    """The per-iteration scalars mmengine wrote to vis_data/scalars.json."""
    files = list(work_dir.glob('*/vis_data/scalars.json'))
    assert files, f'no scalars.json under {work_dir}'
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def test_dist_train_two_cpu_processes(tmp_path, fake_tiny, free_port, subprocess_env):
    """2 gloo processes finish, leave a checkpoint, losses are finite; rank 0 alone evaluates
    and records; without credentials wandb logs offline with one warning."""
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
