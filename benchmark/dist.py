"""Process helpers asked one way everywhere: rank, main process, any-process, unwrap, leave."""
import os

import torch
import torch.distributed as torch_dist
from torch import nn


def rank() -> int:
    """Global rank of this process: the process group's, else torchrun's RANK, else 0.

    The environment is read where no process group exists yet (argument checks, config
    errors), so that only rank 0 prints.
    """
    if torch_dist.is_available() and torch_dist.is_initialized():
        return torch_dist.get_rank()
    return int(os.environ.get('RANK', '0'))


def local_rank() -> int:
    """Rank of this process on its node (torchrun's LOCAL_RANK, else 0)."""
    return int(os.environ.get('LOCAL_RANK', '0'))


def is_main() -> bool:
    """True on the process that writes files and prints (rank 0)."""
    return rank() == 0


def distributed() -> bool:
    """True when a process group with more than one process is running."""
    return (torch_dist.is_available() and torch_dist.is_initialized()
            and torch_dist.get_world_size() > 1)


def any_process(flag: bool) -> bool:
    """True on every process if ``flag`` is True on any (a collective when distributed)."""
    if not distributed():
        return flag
    device = 'cuda' if torch_dist.get_backend() == 'nccl' else 'cpu'
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    torch_dist.all_reduce(value, op=torch_dist.ReduceOp.MAX)
    return bool(value.item() > 0)


def barrier() -> None:
    """Wait for every process (no-op in one process)."""
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DDP / mmengine wrapper (the model itself when unwrapped)."""
    return model.module if hasattr(model, 'module') else model


def leave_together() -> None:
    """Wait for every process (rank 0 may still be evaluating), then close the process group.

    A process that exits while another still holds the gloo connection can be aborted by
    gloo's teardown (SIGABRT), failing a run that had finished.
    """
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        torch_dist.destroy_process_group()
