"""Process helpers asked one way everywhere: rank, main process, any-process, unwrap, leave, free.

torch is imported only where a process group is used, so that the command-line checks of every
tool (`benchmark.cli`) ask `is_main` without loading it.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn


def _group():
    """torch.distributed when a process group is running in this process, else None."""
    torch_dist = sys.modules.get('torch.distributed')
    if torch_dist is not None and torch_dist.is_available() and torch_dist.is_initialized():
        return torch_dist
    return None


def rank() -> int:
    """Global rank of this process: the process group's, else torchrun's RANK, else SLURM's
    SLURM_PROCID, else 0.

    The environment is read where no process group exists yet (argument checks, config
    errors), so that only rank 0 prints.
    """
    group = _group()
    if group is not None:
        return group.get_rank()
    return int(os.environ.get('RANK', os.environ.get('SLURM_PROCID', '0')) or 0)


def local_rank() -> int:
    """Rank of this process on its node (torchrun's LOCAL_RANK, else 0)."""
    return int(os.environ.get('LOCAL_RANK', '0'))


def is_main() -> bool:
    """True on the process that writes files and prints (rank 0)."""
    return rank() == 0


def distributed() -> bool:
    """True when a process group with more than one process is running."""
    group = _group()
    return group is not None and group.get_world_size() > 1


def any_process(flag: bool) -> bool:
    """True on every process if ``flag`` is True on any (a collective when distributed)."""
    if not distributed():
        return flag
    import torch
    import torch.distributed as torch_dist
    device = 'cuda' if torch_dist.get_backend() == 'nccl' else 'cpu'
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    torch_dist.all_reduce(value, op=torch_dist.ReduceOp.MAX)
    return bool(value.item() > 0)


def barrier() -> None:
    """Wait for every process (no-op in one process)."""
    group = _group()
    if group is not None:
        group.barrier()


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DDP / mmengine wrapper (the model itself when unwrapped)."""
    return model.module if hasattr(model, 'module') else model


def leave_together() -> None:
    """Wait for every process (rank 0 may still be evaluating), then close the process group.

    A process that exits while another still holds the gloo connection can be aborted by
    gloo's teardown (SIGABRT), failing a run that had finished.
    """
    group = _group()
    if group is not None:
        group.barrier()
        group.destroy_process_group()


def free_groups() -> None:
    """Free what still holds a destroyed process group, while the interpreter still runs.

    `destroy_process_group` only forgets a group: whatever refers to it (a DDP wrapper's reducer
    does) keeps it alive until that goes, which for a runner's reference cycles is the
    interpreter's shutdown. Freed there, gloo's threads abort the process (SIGABRT, "terminate
    called without an active exception") after the run has finished: 3 of 17 two-process DDP
    runs on a 2-core CPU, none of 40 freed first (pytorch/pytorch#109478 on the group's
    lifetime). Call it once the caller has dropped its references (tools/train.py: the runner).
    The workers of the loaders are stopped first: the collection would wait 5 s for each
    (`close_loader_workers`).
    """
    import gc
    close_loader_workers()
    gc.collect()


def close_loader_workers() -> None:
    """Stop the worker processes of every DataLoader iterator still alive.

    A loader with persistent workers keeps its iterator, and a runner's reference cycles keep
    the loader: collected by `gc.collect` (`free_groups`), the iterator's index
    queues are finalized before the iterator itself, so the workers never get the stop message,
    and torch waits 5 s for each (MP_STATUS_CHECK_INTERVAL) before it terminates it
    (pytorch/pytorch#81794; no public way to close a loader, pytorch/pytorch#64766). Stopped
    here, while the queues work, they end at once.
    """
    import gc
    from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter
    # type(), not isinstance: the objects include weak proxies whose referent is gone
    alive = [obj for obj in gc.get_objects()
             if issubclass(type(obj), _MultiProcessingDataLoaderIter)]
    for iterator in alive:
        iterator._shutdown_workers()

