"""End to end: tools/dist_train.sh on tiny generated data, two CPU processes, evaluated and logged:
the shared two-process run of tests/e2e/conftest.py (`reference_2p`), which the tests that kill,
signal or fill the disk of a two-process run compare their resumed weights with. Bad options
and a missing data root as one line: tests/engine/config/test_config_check.py."""
import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

from benchmark.names import DEFAULT_PROTOCOLS
from tests.e2e.conftest import EPOCHS, STEPS


def logged_scalars(work_dir: Path) -> list:
    """The per-iteration scalars mmengine wrote to vis_data/scalars.json."""
    files = list(work_dir.glob('*/vis_data/scalars.json'))
    assert files, f'no scalars.json under {work_dir}'
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def test_dist_train_two_cpu_processes(reference_2p):
    """2 gloo processes finish, leave a checkpoint, losses are finite; rank 0 alone evaluates
    and records (with a training step counted in both processes); without credentials wandb
    logs offline with one warning."""
    proc, work_dir = reference_2p.proc, reference_2p.work
    assert (work_dir / f'epoch_{EPOCHS}.pth').is_file()
    rows = [r for r in logged_scalars(work_dir) if 'loss' in r]
    assert len(rows) == EPOCHS * STEPS[2]  # logged every iteration
    assert all(math.isfinite(r[k]) for r in rows for k in ('loss', 'loss_inst', 'loss_mix'))
    assert 'Distributed training: True' in proc.stdout + proc.stderr
    records = list((reference_2p.results / 'runs').glob('*.json'))
    assert len(records) == 1  # rank 0 alone writes the end-of-training evaluation
    record = json.loads(records[0].read_text())
    assert (record['method'], record['world_size'], record['total_batch']) == ('mixco', 2, 8)
    assert set(record['protocols']) == set(DEFAULT_PROTOCOLS)
    # one training step counted in both processes after training (its keys are gathered)
    compute = record['extra']['compute']
    assert (compute['encoder_passes'], compute['batch']) == (2.5, 4)
    assert compute['flops_per_image'] > 0
    # the run's total: every iteration's batch in both processes, times the step's FLOPs
    assert (compute['train_images'], compute['processes']) == (EPOCHS * STEPS[2] * 8, 2)
    assert compute['train_flops'] == compute['flops_per_image'] * compute['train_images']
    meta = torch.load(work_dir / f'epoch_{EPOCHS}.pth', map_location='cpu',
                      weights_only=False)['meta']
    assert compute['device_seconds'] == pytest.approx(2 * sum(meta['epoch_seconds']))
    assert (records[0].with_suffix('') / 'tsne.png').is_file()
    if importlib.util.find_spec('wandb') is None:  # a GPU image: local logs, one warning
        assert proc.stderr.count('wandb is not installed') == 1
        return
    assert proc.stderr.count('wandb has no credentials') == 1
    tables = list(work_dir.glob('**/wandb/offline-run-*/files/media/table/eval/*.table.json'))
    assert len(tables) == 1  # the evaluation reached the training's (offline) wandb run
    logged = json.loads(tables[0].read_text())['data']
    assert ['mixco', 'resnet18-w0.25', 'tiny-imagenet', EPOCHS, 'tiny-imagenet', 'knn', 'top1',
            record['protocols']['knn']['metrics']['top1'], ''] in logged
