"""The mix-up family's configs train end to end: tools/train.py (in-process, through its main)
runs each paper-scale config (shrunk by --cfg-options: its layers at a quarter width) for one
epoch with evaluation, and the record names the method."""
import json

import pytest

from benchmark.data.fakes import make_fake_tiny_imagenet
from tools import train as train_tool

SHRINK = ['train_dataloader.batch_size=4', 'train_dataloader.dataset.input_size=32',
          'train_cfg.max_epochs=1', 'model.queue_size=64', 'model.backbone.width=0.25',
          'train_dataloader.num_workers=0',
          'train_dataloader.persistent_workers=False', 'default_hooks.logger.interval=1',
          'custom_hooks=[]']


@pytest.fixture(scope='module')
def tiny_root(tmp_path_factory):
    return make_fake_tiny_imagenet(tmp_path_factory.mktemp('family'), num_classes=2,
                                   train_per_class=4, val_per_class=2, size=32)


@pytest.mark.parametrize('name, method, extra', [
    ('imix_r18_tiny.py', 'imix', []),
    ('unmix_r18_tiny.py', 'unmix', []),
    # MoCHi mixes from epoch 10 on; 0 here so the one epoch exercises the mixing
    ('mochi_r18_tiny.py', 'mochi', ['model.mix_warmup_epochs=0', 'model.mix_hardest=16',
                                    'model.mix_synthetic=8', 'model.mix_query_synthetic=4']),
])
def test_family_config_trains_and_records(name, method, extra, tiny_root, tmp_path, run_main):
    code, _, err, _ = run_main(
        train_tool, f'configs/{name}', '--work-dir', tmp_path / 'w', '--results-dir',
        tmp_path / 'r', '--cfg-options', f'train_dataloader.dataset.data_root={tiny_root}',
        *SHRINK, *extra)
    assert code == 0, err[-3000:]
    (record,) = (tmp_path / 'r' / 'runs').glob('*.json')
    data = json.loads(record.read_text())
    assert data['method'] == method and data['status'] == 'ok'
    assert isinstance(data['protocols']['knn']['metrics']['top1'], float)
    scalars = next((tmp_path / 'w').glob('*/vis_data/scalars.json')).read_text().splitlines()
    losses = [json.loads(line) for line in scalars if '"loss"' in line]
    assert losses and all(row['loss'] == row['loss'] for row in losses)  # finite, not NaN
