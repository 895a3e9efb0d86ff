"""The epoch loop that takes its batches one ahead (benchmark.engine.prefetch_loop): the order,
when each batch is prepared, and which runs get it. Training with it, killed and resumed, is
tests/harness/faults/test_resume_in_process.py."""
import pytest
from mmengine.config import Config

from benchmark.engine.prefetch_loop import LOOP, one_ahead, use_prefetch_loop
from tests.conftest import ROOT


def test_each_batch_is_prepared_before_the_one_before_it_is_handed_out():
    log = []

    def batches():
        for i in range(4):
            log.append(f'load {i}')
            yield i

    def prepare(i):
        log.append(f'prepare {i}')
        return i * 10
    for got in one_ahead(batches(), prepare):
        log.append(f'train {got // 10}')
    assert log == ['load 0', 'prepare 0', 'load 1', 'prepare 1', 'train 0', 'load 2',
                   'prepare 2', 'train 1', 'load 3', 'prepare 3', 'train 2', 'train 3']
    assert list(one_ahead([], prepare)) == [] and list(one_ahead([5], prepare)) == [50]


@pytest.mark.parametrize('name, want', [('mixco_r18_tiny_fast.py', LOOP),
                                        ('mocov2_r18_digits.py', LOOP),
                                        ('mixco_r18_tiny.py', 'EpochBasedTrainLoop')])
def test_runs_with_device_views_take_the_loop_and_others_keep_theirs(name, want):
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    cfg.pop('train_views', None)  # the paper config's PIL views, as on a CPU
    use_prefetch_loop(cfg)
    assert cfg.train_cfg.type == want
    cfg = Config.fromfile(str(ROOT / 'configs' / 'mocov2_r18_digits.py'))
    cfg.train_cfg = dict(by_epoch=True, max_epochs=2)
    use_prefetch_loop(cfg)
    assert cfg.train_cfg == dict(type=LOOP, max_epochs=2)  # mmengine takes one of the two
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=5)
    use_prefetch_loop(cfg)
    assert cfg.train_cfg.type == 'IterBasedTrainLoop'
