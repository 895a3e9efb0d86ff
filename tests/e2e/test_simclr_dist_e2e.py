"""The authors' SimCLR under DistributedDataParallel: 2 gloo CPU processes with sync-BN."""
import json
import math
import subprocess
import sys


from tests.conftest import ROOT


def test_mixco_simclr_two_cpu_processes_with_sync_bn(tmp_path, fake_tiny, free_port,
                                                     subprocess_env):
    """DDP accepts the CPU sync-BN layers and its all-reduces interleave with DDP's own (the
    config's ResNet-18 at a quarter width: its layers, fewer channels)."""
    work_dir = tmp_path / 'work'
    cmd = ['bash', str(ROOT / 'tools/dist_train.sh'), 'configs/mixco_simclr_r18_tiny.py', '2',
           '--no-eval', '--work-dir', str(work_dir), '--cfg-options',
           f'train_dataloader.dataset.data_root={fake_tiny}', 'train_dataloader.batch_size=8',
           'train_dataloader.dataset.input_size=32', 'train_cfg.max_epochs=1',
           'model.backbone.width=0.25',
           'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
           'default_hooks.logger.interval=1']
    env = dict(subprocess_env, PORT=str(free_port), PYTHON=sys.executable)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'Distributed training: True' in proc.stdout + proc.stderr
    assert (work_dir / 'epoch_1.pth').is_file()
    scalars = next(work_dir.glob('*/vis_data/scalars.json')).read_text().splitlines()
    rows = [json.loads(line) for line in scalars if '"loss"' in line]
    assert len(rows) == 2  # 32 images / (2 processes x 8)
    assert all(math.isfinite(r[k]) for r in rows for k in ('loss_inst', 'loss_mix'))
