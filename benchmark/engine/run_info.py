"""RunInfoHook: world size, total batch, time per epoch, images trained on, peak memory and the
key encoder's BatchNorm regime, kept in checkpoint meta."""
import resource
import time
from typing import List, Optional

import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from benchmark import dist


def peak_memory_gb() -> tuple:
    """(peak memory in GB, what was measured): CUDA allocations, else the process's max RSS."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 1024**3, 'cuda-max-allocated'
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 'cpu-max-rss'


@HOOKS.register_module()
class RunInfoHook(Hook):
    """Store what a results record needs in every checkpoint's meta.

    world size, total batch, mean wall time per training epoch, the images this process has
    trained on (``images_trained``: the samples of every training iteration, across resumes; None
    where a run resumed from a checkpoint that did not count them), peak memory and where the
    training views were drawn (``views``: 'device' or 'loader'): mmengine keeps
    none of them, and an evaluation of the checkpoint later must still report them. For a
    model with a momentum key encoder (MoCo and its family) also ``key_bn``: how its BatchNorm
    was kept from seeing the query batch (`MoCo.key_batch_norm`).
    """

    priority = 'HIGH'  # before CheckpointHook (VERY_LOW) saves at the end of an epoch

    def __init__(self) -> None:
        self.epoch_seconds: List[float] = []
        self.images_trained: Optional[int] = 0
        self._start: Optional[float] = None

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        meta = checkpoint.get('meta', {})
        self.epoch_seconds = list(meta.get('epoch_seconds', []))
        # A checkpoint written before the count, after training: what it trained on is unknown.
        trained = meta.get('images_trained')
        if trained is None:
            trained = None if meta.get('iter') else 0
        self.images_trained = trained

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self.images_trained is not None:
            samples = (data_batch or {}).get('data_samples') if isinstance(data_batch, dict) \
                else None
            self.images_trained += (len(samples) if samples is not None
                                    else runner.train_dataloader.batch_size)

    def before_train_epoch(self, runner) -> None:
        self._start = time.perf_counter()

    def after_train_epoch(self, runner) -> None:
        if self._start is not None:
            self.epoch_seconds.append(time.perf_counter() - self._start)

    def info(self, runner) -> dict:
        """The run's facts as stored in checkpoint meta."""
        memory, kind = peak_memory_gb()
        times = self.epoch_seconds
        info = dict(world_size=runner.world_size,
                    total_batch=runner.world_size * runner.train_dataloader.batch_size,
                    epoch_seconds=list(times),
                    time_s_per_epoch=sum(times) / len(times) if times else None,
                    images_trained=self.images_trained,
                    peak_memory_gb=memory, memory_kind=kind)
        model = dist.unwrap(getattr(runner, 'model', None))
        # Where the training views were drawn: on the model's device or by PIL in the workers.
        info['views'] = ('device' if type(getattr(model, 'data_preprocessor', None)).__name__
                         == 'GPUViewPreprocessor' else 'loader')
        key_bn = getattr(model, 'key_batch_norm', None)
        if callable(key_bn):
            info['key_bn'] = key_bn(runner.world_size)
        return info

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint.setdefault('meta', {}).update(self.info(runner))
