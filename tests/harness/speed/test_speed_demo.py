"""The demo part of the speed harness: its three views variants, the part timer on a real Runner
(tiny backbone, a few iterations) and the projection."""
import pytest
from mmengine.runner import Runner

from benchmark.harness.speed.demo import (DEMO_CONFIGS, PARTS, VARIANTS, PartTimer, demo_table,
                                          summarize, variant_cfg)


def test_variants_draw_the_same_views_two_ways(tmp_path):
    batched, own = variant_cfg(DEMO_CONFIGS['mixco'], 'batched', 2, str(tmp_path / 'b'))
    assert own == dict(epochs=30, knn_interval=5)  # the config's own, before the override
    assert batched.train_cfg.max_epochs == 2 and batched.train_dataloader.batch_size == 64
    assert [h['interval'] for h in batched.custom_hooks if h['type'] == 'KNNMonitorHook'] == [1]
    pre = batched.model.data_preprocessor
    assert pre.type == 'GPUViewPreprocessor' and pre.input_size == 16
    assert batched.train_dataloader.dataset.view == 'raw_uint8'
    for variant, workers in (('pil-worker', 1), ('pil-main', 0)):
        cfg, _ = variant_cfg(DEMO_CONFIGS['mixco'], variant, 2, str(tmp_path / variant))
        assert 'data_preprocessor' not in cfg.model
        assert cfg.train_dataloader.dataset.view == pre.view  # the preprocessor's own preset
        assert cfg.train_dataloader.num_workers == workers
        assert cfg.train_dataloader.persistent_workers == bool(workers)


def test_projection_counts_the_knn_monitor_on_its_own_epochs():
    epoch = {p: 0.0 for p in PARTS}
    first = dict(epoch, epoch=100.0, KNNMonitorHook=50.0)  # start-up: not counted
    later = [dict(epoch, epoch=10.0 + d, KNNMonitorHook=2.0) for d in (0.0, 1.0, 2.0)]
    out = summarize([first, *later], dict(epochs=30, knn_interval=5))
    assert out['per_epoch']['epoch'] == 11.0 and out['knn_per_call'] == 2.0
    assert out['knn_calls'] == 6 and out['projected_train'] == 30 * (11.0 - 2.0) + 6 * 2.0
    assert summarize([first], dict(epochs=1, knn_interval=1))['per_epoch']['epoch'] == 100.0


@pytest.mark.parametrize('variant', ['batched', 'pil-main'])
def test_timer_splits_a_real_epoch_into_its_parts(tmp_path, tiny_backbones, variant):
    """Two epochs of three iterations: every part is timed and the parts add up to the epoch."""
    cfg, _ = variant_cfg(DEMO_CONFIGS['mocov2'], variant, 2, str(tmp_path))
    cfg.train_dataloader.num_batch_per_epoch = 3
    cfg.train_dataloader.batch_size = 8
    cfg.model.queue_size = 32
    for hook in cfg.custom_hooks:
        if hook['type'] == 'KNNMonitorHook':
            hook.update(num_train=64, num_test=32)
    runner = Runner.from_cfg(cfg)
    timer = PartTimer(runner)
    runner.train()
    assert len(timer.epochs) == 2
    for parts in timer.epochs:
        assert set(parts) == set(PARTS)
        assert parts['model step'] > 0 and parts['SafeCheckpointHook'] > 0
        assert parts['KNNMonitorHook'] > 0 and parts['OnlineLinearProbeHook'] > 0
        assert parts['preprocessor'] > 0  # batched: drawing the views; else moving the batch
        assert sum(v for k, v in parts.items() if k != 'epoch') == pytest.approx(parts['epoch'])


def test_table_gives_each_part_per_variant_and_the_projections():
    per_epoch = {p: float(i) for i, p in enumerate(PARTS)}
    variant = dict(per_epoch=per_epoch, projected_run=600.0)
    demo = dict(epochs=3, rounds=1, projected_demo={v: 1200.0 for v in VARIANTS},
                methods={'mocov2': dict(evaluation={'features': 1.0, 'knn': 0.5},
                                        variants={v: variant for v in VARIANTS})})
    lines = demo_table(demo)
    assert '| mocov2 | ' + ' | '.join(VARIANTS) + ' |' in lines
    assert f'| epoch | {per_epoch["epoch"]:.2f} |' in '\n'.join(lines)
    assert '| projected run (min) | 10.0 | 10.0 | 10.0 |' in lines
    assert any('features 1.0, knn 0.5; total 1.5' in line for line in lines)
    assert lines[-1].endswith('pil-worker 20.0, pil-main 20.0, batched 20.0.')
