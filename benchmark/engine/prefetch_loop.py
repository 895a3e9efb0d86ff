"""mmengine's epoch loop with the next batch's views drawn while the current step runs.

``PrefetchViewsTrainLoop`` is ``EpochBasedTrainLoop`` whose epoch takes its batches one ahead:
batch i + 1 is taken from the loader and handed to the model's data preprocessor's ``prepare``
(`benchmark.data.gpu_views.GPUViewPreprocessor`: its views queued on a CUDA side stream) before
step i is queued, so on a GPU the views overlap the step. Everything else is the parent's: the
same batches in the same order, the same hooks with the same arguments (a hook sees the
prepared batch), the same checkpoints; a resumed run's sampler starts from the iteration
count, not from what the loader handed out, so the one batch taken ahead and not trained
before a stop is simply taken again.

`use_prefetch_loop` makes a run with device views use it (tools/train.py, the speed harness);
the preprocessor's ``prefetch`` decides whether it prepares ahead (off by default; ``'auto'``: on CUDA).
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from mmengine.registry import LOOPS
from mmengine.runner.loops import EpochBasedTrainLoop

from benchmark import dist
from benchmark.engine.train_views import device_views

LOOP = 'PrefetchViewsTrainLoop'


def one_ahead(batches: Iterable, prepare: Callable[[dict], dict]) -> Iterator[dict]:
    """``prepare(b)`` for each batch in order, each prepared before the one before it is
    handed out."""
    iterator = iter(batches)
    try:
        ahead = prepare(next(iterator))
    except StopIteration:
        return
    for batch in iterator:
        current, ahead = ahead, prepare(batch)
        yield current
    yield ahead


@LOOPS.register_module()
class PrefetchViewsTrainLoop(EpochBasedTrainLoop):
    """``EpochBasedTrainLoop`` taking its batches one ahead through the model's data
    preprocessor's ``prepare`` where it ``prefetches()``; the parent's epoch elsewhere."""

    def run_epoch(self) -> None:
        pre = dist.unwrap(self.runner.model).data_preprocessor
        if not (hasattr(pre, 'prepare') and pre.prefetches()):
            return super().run_epoch()
        # mmengine's EpochBasedTrainLoop.run_epoch, its batches prepared one ahead
        self.runner.call_hook('before_train_epoch')
        self.runner.model.train()
        for idx, data_batch in enumerate(one_ahead(self.dataloader, pre.prepare)):
            self.run_iter(idx, data_batch)
        self.runner.call_hook('after_train_epoch')
        self._epoch += 1


def use_prefetch_loop(cfg) -> None:
    """A run whose model draws the training views (GPUViewPreprocessor) on mmengine's epoch
    loop gets `PrefetchViewsTrainLoop`; a config naming another loop keeps it."""
    train_cfg = cfg.get('train_cfg')
    if device_views(cfg) is None or not isinstance(train_cfg, dict):
        return
    if 'type' not in train_cfg and train_cfg.get('by_epoch', True):
        train_cfg.pop('by_epoch', None)  # mmengine takes a type or by_epoch, not both
        train_cfg['type'] = LOOP
    elif train_cfg.get('type') in ('EpochBasedTrainLoop', EpochBasedTrainLoop):
        train_cfg['type'] = LOOP
