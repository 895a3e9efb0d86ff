"""Checkpoints that are never corrupt and resume into the run they continue.

mmengine 0.10.7's CheckpointHook writes checkpoints in place, deletes the oldest one before the
new one is complete, writes `last_checkpoint` in place, saves no RNG state and resumes
iteration checkpoints at the start of their epoch. `SafeCheckpointHook` keeps its options
(``interval``, ``max_keep_ckpts``, ``save_last``...) and fixes all of that. A checkpoint that
does not fit on the disk ends the run with one line (`DiskFullError`), the last good checkpoint
left as it was.
"""
import errno
import glob
import inspect
import os
import os.path as osp
from typing import Optional

import torch
from mmengine.dist import all_gather_object, get_rank, get_world_size
from mmengine.hooks import CheckpointHook
from mmengine.registry import HOOKS

from benchmark import dist
from benchmark.atomic_io import atomic_write_text, free_bytes, fsync_dir, no_space_left, size_text
from benchmark.engine.checkpoints import checkpoint_candidates
from benchmark.engine.compat import runner_resumes
from benchmark.engine.nan_guard import DivergedError, NaNGuardHook
from benchmark.engine.rng_state import capture_rng_state, restore_rng_state
from benchmark.data.sampler import ResumableSampler
from benchmark.layout import ITER_CHECKPOINT, LAST_CHECKPOINT
from benchmark.engine.tracking import wandb_run_id_of


class DiskFullError(OSError):
    """A checkpoint did not fit on the disk: one line naming the folder, the space it needs and
    the last good checkpoint (on every process of the run)."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.ENOSPC, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def full_disk_message(folder: str, needed: Optional[int], work_dir: str) -> str:
    """'no space left on device writing checkpoint to DIR (needs about 45 MB, 3.2 MB free); the
    last good checkpoint is iter_400.pth; free space and rerun with --resume'."""
    found = checkpoint_candidates(work_dir) or checkpoint_candidates(folder)
    last = (f'the last good checkpoint is {osp.basename(found[0])}' if found
            else 'no checkpoint was written before')
    return (f'no space left on device writing checkpoint to {folder} (needs about '
            f'{size_text(needed)}, {size_text(free_bytes(folder))} free); {last}; free space '
            'and rerun with --resume')


def full_disk_line(err: OSError) -> str:
    """The one line a full disk ends a run with: the checkpoint's (`DiskFullError`), or for
    another file 'no space left on device writing FILE (3.2 MB free); free space and rerun
    with --resume'."""
    if isinstance(err, DiskFullError):
        return err.message
    return (f'no space left on device writing {err.filename or "a file"} '
            f'({size_text(free_bytes(err.filename or "."))} free); free space and rerun with '
            '--resume')


def checkpoint_bytes(runner) -> int:
    """About the size of one of this run's checkpoints: the last one written, else the bytes of
    the model's and the optimizer's tensors."""
    found = checkpoint_candidates(runner.work_dir)
    if found:
        return osp.getsize(found[0])
    tensors = list(dist.unwrap(runner.model).state_dict().values())
    optimizer = getattr(getattr(runner, 'optim_wrapper', None), 'optimizer', None)
    for state in (optimizer.state.values() if optimizer is not None else ()):
        tensors += [v for v in state.values() if torch.is_tensor(v)]
    return sum(t.numel() * t.element_size() for t in tensors if torch.is_tensor(t))


def non_finite_tensors(state_dict: dict) -> list:
    """Names of floating-point tensors in ``state_dict`` that hold NaN or inf."""
    return [name for name, value in state_dict.items()
            if torch.is_tensor(value) and value.is_floating_point()
            and not bool(torch.isfinite(value).all())]


@HOOKS.register_module()
class SafeCheckpointHook(CheckpointHook):
    """mmengine's CheckpointHook with atomic writes, RNG states, iteration checkpoints.

    * Each checkpoint is written to a temporary file in the same folder, fsynced and renamed;
      `last_checkpoint` likewise; the oldest checkpoint is removed only after that.
    * Every checkpoint holds the RNG states of every process (``rng_states``); resuming puts
      them back and starts the sampler where the checkpoint left the epoch.
    * ``iter_interval`` adds `iter_<n>.pth` every n iterations (only the newest is kept), so a
      kill loses at most n iterations.
    * A model with non-finite weights is never saved, and the loss terms the NaN guard has not
      checked yet are checked before anything is written.

    Args:
        iter_interval: Also save every this many iterations (0: epoch checkpoints only).
        **kwargs: mmengine `CheckpointHook` arguments (by epoch).
    """

    def __init__(self, iter_interval: int = 0, **kwargs) -> None:
        own = [p.name for p in inspect.signature(CheckpointHook).parameters.values()
               if p.kind is not p.VAR_KEYWORD]
        unknown = [key for key in kwargs if key not in own]  # mmengine hands them to
        if unknown:  # Runner.save_checkpoint, which would refuse them at the first save
            raise TypeError(f'SafeCheckpointHook.__init__() got an unexpected keyword argument '
                            f'{unknown[0]!r}')
        for name, off in (('interval', 'no periodic checkpoint (save_last still saves the last)'),
                          ('max_keep_ckpts', 'keeping every checkpoint')):
            value = kwargs.get(name, -1)
            if value != -1 and value < 1:
                raise ValueError(f'{name} must be >= 1, or -1 for {off}; got {value}')
        if kwargs.get('rule') not in (None, 'greater', 'less'):
            raise ValueError(f"rule must be 'greater', 'less' or None, got {kwargs['rule']!r}")
        if '{}' not in str(kwargs.get('filename_tmpl') or '{}'):  # else one name for every file
            raise ValueError(f"filename_tmpl must hold '{{}}' for the epoch or iteration, got "
                             f"{kwargs['filename_tmpl']!r}")
        super().__init__(**kwargs)
        if iter_interval < 0:
            raise ValueError(f'iter_interval must be >= 0, got {iter_interval}')
        self.iter_interval = iter_interval
        self._rng_states: Optional[list] = None
        self._pending_restore: Optional[dict] = None

    # -- saving ------------------------------------------------------------------------------
    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        super().after_train_iter(runner, batch_idx, data_batch, outputs)
        last_of_epoch = (runner.iter + 1) % len(runner.train_dataloader) == 0
        if (self.iter_interval and (runner.iter + 1) % self.iter_interval == 0
                and not (last_of_epoch and self.by_epoch)):
            self.save_iteration(runner)

    def save_iteration(self, runner) -> str:
        """Save `iter_<n>.pth` now (after iteration n); keep only the newest one."""
        step = runner.iter + 1
        name = ITER_CHECKPOINT.format(step)
        self._write(runner, name, by_epoch=False)
        path = osp.join(self.out_dir, name)
        if dist.is_main():
            for old in glob.glob(osp.join(self.out_dir, ITER_CHECKPOINT.format('*'))):
                if osp.abspath(old) != osp.abspath(path):
                    os.remove(old)
        return path

    def save_epoch(self, runner) -> str:
        """Save the epoch checkpoint now (pre-emption at an epoch's end); return its path."""
        self._save_checkpoint(runner)
        return self.last_ckpt

    def _save_checkpoint_with_step(self, runner, step, meta) -> None:
        # Same bookkeeping as mmengine, but the oldest file goes only once the new one is whole.
        doomed = None
        if self.max_keep_ckpts > 0 and not (self.keep_ckpt_ids
                                            and self.keep_ckpt_ids[-1] == step):
            if len(self.keep_ckpt_ids) == self.max_keep_ckpts:
                doomed = self.keep_ckpt_ids.popleft()
            self.keep_ckpt_ids.append(step)
            runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))
        self._write(runner, self.filename_tmpl.format(step), by_epoch=self.by_epoch, meta=meta)
        if doomed is not None and dist.is_main():
            old = osp.join(self.out_dir, self.filename_tmpl.format(doomed))
            if osp.isfile(old):
                os.remove(old)

    def _write(self, runner, filename: str, by_epoch: bool, meta: Optional[dict] = None) -> None:
        for hook in runner.hooks:  # the loss terms not yet checked, first: they name the step
            if isinstance(hook, NaNGuardHook):
                hook.check(runner)
        model = dist.unwrap(runner.model)
        bad = non_finite_tensors(model.state_dict())
        if dist.any_process(bool(bad)):  # collective: every process stops, none waits in a gather
            where = (f'{len(bad)} tensors (first: {bad[0]}) on process {get_rank()}' if bad
                     else 'tensors of another process')
            raise DivergedError(f'training diverged at iteration {runner.iter + 1}: refusing '
                                f'to save {filename}, non-finite values in {where}',
                                elsewhere=not bad)
        # Collective: every process hands its RNG states to rank 0, which writes them.
        self._rng_states = all_gather_object(capture_rng_state())
        path = osp.join(self.out_dir, filename)
        tmp = f'.{filename}.tmp'
        self.last_ckpt = path
        runner.message_hub.update_info('last_ckpt', path)
        failed = None
        try:
            runner.save_checkpoint(self.out_dir, tmp, self.file_client_args,
                                   save_optimizer=self.save_optimizer,
                                   save_param_scheduler=self.save_param_scheduler,
                                   meta=dict(meta or {}), by_epoch=by_epoch,
                                   backend_args=self.backend_args, **self.args)
            if dist.is_main():  # only rank 0 writes
                with open(osp.join(self.out_dir, tmp), 'rb+') as handle:
                    os.fsync(handle.fileno())
                os.replace(osp.join(self.out_dir, tmp), path)
                fsync_dir(self.out_dir)
                atomic_write_text(osp.join(runner.work_dir, LAST_CHECKPOINT), path)
        except BaseException as err:  # e.g. a full disk: no half-written file stays behind
            if dist.is_main() and osp.exists(osp.join(self.out_dir, tmp)):
                os.remove(osp.join(self.out_dir, tmp))
            if not no_space_left(err):
                raise
            failed = full_disk_message(self.out_dir, checkpoint_bytes(runner), runner.work_dir)
        self._rng_states = None
        # Collective: a full disk on rank 0 ends every process, none waits in the next step.
        if dist.any_process(failed is not None):
            messages = all_gather_object(failed) if dist.distributed() else [failed]
            raise DiskFullError(next(m for m in messages if m))

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self._rng_states is not None:
            checkpoint['rng_states'] = self._rng_states
        run_id = wandb_run_id_of(runner.visualizer)
        if run_id:  # a resume from this checkpoint logs into the same wandb run
            checkpoint.setdefault('meta', {})['wandb_run_id'] = run_id

    # -- resuming ----------------------------------------------------------------------------
    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not runner_resumes(runner) or 'rng_states' not in checkpoint:
            return
        states = checkpoint['rng_states']
        if len(states) != get_world_size():
            runner.logger.warning(
                f'checkpoint holds RNG states of {len(states)} processes, this run has '
                f'{get_world_size()}: random draws will differ from the original run')
            return
        self._pending_restore = dict(rng=states[get_rank()], meta=dict(checkpoint['meta']))

    def before_train(self, runner) -> None:
        super().before_train(runner)
        # The loader's worker seeds come from their own generator, not the global one, so
        # building loader iterators (which a resumed run does at a different point) draws
        # nothing from the states restored below. Augmentations are seeded per sample.
        loader = runner.train_dataloader
        loader.generator = torch.Generator().manual_seed(0)
        if self._pending_restore is None:
            return
        meta = self._pending_restore['meta']
        epoch, it = int(meta['epoch']), int(meta['iter'])
        done = it - epoch * len(loader)  # batches of this epoch already trained
        if 0 < done < len(loader):
            sampler = loader.sampler
            if not isinstance(sampler, ResumableSampler):
                raise TypeError('resuming mid-epoch needs train_dataloader.sampler '
                                f'type=ResumableSampler, got {type(sampler).__name__}')
            sampler.resume_at(epoch, done * loader.batch_size)
            runner.logger.info(f'resuming epoch {epoch + 1} at batch {done + 1} of {len(loader)}')
        restore_rng_state(self._pending_restore['rng'])
        self._pending_restore = None
