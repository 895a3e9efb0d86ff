"""tools/train.py in-process: one bf16 + channels_last step of each *_fast config on the tiny fake
data, and the checkpoint it saves."""
import pytest
import torch

from benchmark.engine.compat import allow_mmengine_checkpoints
from tools import train

TINY = ['train_dataloader.batch_size=8', 'train_dataloader.dataset.input_size=32',
        'train_cfg.max_epochs=1', 'model.queue_size=64', 'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False', 'train_dataloader.num_batch_per_epoch=1']
NHWC = torch.channels_last


@pytest.mark.slow
@pytest.mark.parametrize('name', ['mocov2_r18_tiny_fast.py', 'mixco_r18_tiny_fast.py'])
def test_fast_config_trains_one_step_on_cpu(name, tmp_path, fake_tiny, run_main):
    """tools/train.py runs one bf16 + channels_last step; the checkpoint shows both."""
    code, _, err, _ = run_main(train, f'configs/{name}', '--work-dir', tmp_path, '--no-eval',
                               '--cfg-options', f'train_dataloader.dataset.data_root={fake_tiny}',
                               *TINY)
    assert code == 0, err[-3000:]
    allow_mmengine_checkpoints()
    ckpt = torch.load(tmp_path / 'epoch_1.pth', map_location='cpu')
    weights = ckpt['state_dict']
    assert weights['backbone.conv1.weight'].is_contiguous(memory_format=NHWC)
    assert weights['queue'].dtype == torch.float32
    assert all(torch.isfinite(v).all() for v in weights.values() if v.is_floating_point())
    assert ckpt['optimizer']['loss_scaler'] == {}  # the AMP wrapper ran, scaler off (bf16)

