"""Non-finite loss terms and weights are found, named, and stop the run: within one logging
interval, and always before a checkpoint is written."""
from types import SimpleNamespace

import pytest
import torch
from mmengine.hooks import LoggerHook

from benchmark.engine.checkpoint_hook import non_finite_tensors
from benchmark.engine.deferred_log import DeferredRuntimeInfoHook, every
from benchmark.engine.nan_guard import DivergedError, NaNGuardHook, non_finite_terms


def test_non_finite_detection():
    assert non_finite_terms({'loss': torch.tensor(1.0), 'loss_mix': torch.tensor(float('nan')),
                             'acc': 0.5, 'x': float('inf')}) == ['loss_mix', 'x']
    assert non_finite_tensors({'a': torch.ones(2), 'b': torch.tensor([1.0, float('inf')]),
                               'n': torch.zeros(2, dtype=torch.long)}) == ['b']


@pytest.mark.parametrize('hook', [NaNGuardHook, DeferredRuntimeInfoHook])
def test_the_interval_is_refused_below_one_in_one_line(hook):
    with pytest.raises(ValueError) as err:
        hook(interval=0)
    assert str(err.value) == f'{hook.__name__}: interval must be >= 1, got 0'


def test_a_hook_reads_at_its_interval_else_the_loggers_else_every_iteration():
    logged = SimpleNamespace(hooks=[LoggerHook(interval=5)])
    assert (every(logged, 3), every(logged, None), every(SimpleNamespace(hooks=[]), None)) == (
        3, 5, 1)


def _runner(iteration: int, epoch: int = 0, batches: int = 100):
    return SimpleNamespace(iter=iteration, epoch=epoch, hooks=[],
                           train_dataloader=range(batches))


def _step(hook, iteration: int, loss: float, batch_idx=None) -> None:
    """after_train_iter of iteration `iteration + 1` (runner.iter counts the ones done)."""
    hook.after_train_iter(_runner(iteration), iteration if batch_idx is None else batch_idx,
                          outputs={'loss': torch.tensor(loss), 'acc': torch.tensor(0.5)})


def test_a_nan_is_caught_at_the_next_check_naming_its_iteration():
    """Checks every `interval` iterations: a NaN at iteration 3 stops the run at iteration 4,
    and the error names iteration 3 and the term."""
    hook = NaNGuardHook(interval=4)
    for i, loss in enumerate([1.0, 0.9, float('nan')]):
        _step(hook, i, loss)  # iterations 1-3: nothing read, nothing raised
    with pytest.raises(DivergedError, match=r'at iteration 3 \(epoch 1\): loss = nan'):
        _step(hook, 3, float('nan'))
    _step(hook, 4, 1.0)  # the checked values are gone: a later check sees only new ones
    hook.check(_runner(5))


@pytest.mark.parametrize('when', ['before_save_checkpoint', 'after_train_epoch', 'after_train'])
def test_unchecked_terms_are_checked_before_a_save_and_at_epoch_and_training_end(when):
    hook = NaNGuardHook(interval=1000)
    _step(hook, 0, float('inf'))
    _step(hook, 1, 1.0)
    args = (_runner(2), {}) if when == 'before_save_checkpoint' else (_runner(2),)
    with pytest.raises(DivergedError, match='at iteration 1'):
        getattr(hook, when)(*args)


def test_safe_checkpoint_hook_checks_the_guard_before_writing(tmp_path, tiny_backbones):
    """A real run logging every 100 iterations: the NaN of iteration 3 is found when
    `iter_4.pth` would be written, and nothing is written."""
    from mmengine.config import Config
    from mmengine.runner import Runner
    import benchmark.components  # noqa: F401
    import benchmark.harness.faults.hooks  # noqa: F401  PoisonHook
    from benchmark.engine.launch import load_config
    from tests.conftest import ROOT
    cfg = load_config(str(ROOT / 'configs/mocov2_r18_digits.py'))
    cfg.merge_from_dict({'train_dataloader.batch_size': 8, 'train_dataloader.num_workers': 0,
                         'train_dataloader.persistent_workers': False,
                         'train_dataloader.num_batch_per_epoch': 6,
                         'train_cfg.max_epochs': 1, 'model.queue_size': 32,
                         'default_hooks.logger.interval': 100,
                         'default_hooks.checkpoint.iter_interval': 4})
    cfg.custom_hooks = [dict(type='NaNGuardHook'), dict(type='PoisonHook', at_iter=3)]
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend')]
    cfg.work_dir, cfg.log_level = str(tmp_path), 'WARNING'
    cfg.experiment_name = f'nan-guard-{tmp_path.name}'
    runner = Runner.from_cfg(cfg)
    with pytest.raises(DivergedError, match=r'at iteration 3 \(epoch 1\): loss'):
        runner.train()
    assert runner.iter == 3  # raised in the hooks after iteration 4, before it was counted
    assert list(tmp_path.glob('*.pth')) == [] and list(tmp_path.glob('.*.tmp')) == []
