"""Batch normalisation with statistics over every process, on GPUs and on CPU processes alike.

The MixCo authors' SimCLR converts its model with `nn.SyncBatchNorm.convert_sync_batchnorm`, so
each forward pass normalises with the mean and variance of that pass's batch on all GPUs.
torch's `nn.SyncBatchNorm` raises on CPU tensors, and the suite also trains as CPU processes over
gloo; `SyncBatchNorm` here runs torch's implementation on GPUs and adds a CPU path built from
a differentiable all-reduce. With one process (or in eval mode) both are plain BatchNorm.
"""
from typing import Optional

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm


class _AllReduceSum(torch.autograd.Function):
    """Sum over processes; its gradient is the sum of every process's output gradient."""

    @staticmethod
    def forward(ctx, x: Tensor, group) -> Tensor:
        ctx.group = group
        out = x.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _AllReduceSum.apply(grad.contiguous(), ctx.group), None


def all_reduce_sum(x: Tensor, group=None) -> Tensor:
    """Sum of `x` over the processes, differentiable (torch.distributed.nn's all_reduce, which
    torch 2.14 deprecates, in ten lines)."""
    return _AllReduceSum.apply(x, group or dist.group.WORLD)


def sync_batch_stats(x: Tensor, group=None) -> tuple:
    """Per-channel mean and biased variance of `x` over every process's batch.

    Args:
        x: Activations (N, C, ...) of this process.
        group: Process group; None for all processes.

    Returns:
        (mean (C,), var (C,), count): statistics over the N_total * prod(...) values of each
        channel on all processes, differentiable w.r.t. every process's `x`; count is a float.
    """
    dims = [0, *range(2, x.dim())]
    local_count = x.new_tensor([x.numel() / x.shape[1]])  # (1,)
    summed = all_reduce_sum(torch.cat([x.sum(dims), local_count]), group)  # (C + 1,)
    count = summed[-1].detach()
    mean = summed[:-1] / count  # (C,)
    shape = [1, -1] + [1] * (x.dim() - 2)
    var = all_reduce_sum(((x - mean.view(shape)) ** 2).sum(dims), group) / count  # (C,)
    return mean, var, float(count)


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose training statistics span every process, on GPUs and on CPU processes.

    GPU tensors run `nn.SyncBatchNorm.forward` (torch's implementation) on this module's state.
    CPU tensors, in training mode with more than one process, take the statistics from
    `sync_batch_stats` and update the running mean and the unbiased running variance as
    BatchNorm does, with the global count. Otherwise (one process, eval mode) it is
    BatchNorm's own forward. Not an `nn.SyncBatchNorm` subclass: DistributedDataParallel
    refuses those on CPU.

    Args:
        As `nn.SyncBatchNorm`.
    """

    # torch's GPU path needs these two of its class; they read only this module's state.
    _check_non_zero_input_channels = nn.SyncBatchNorm._check_non_zero_input_channels
    _torch_sync_forward = nn.SyncBatchNorm.forward

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: Optional[object] = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, x: Tensor) -> None:
        if x.dim() < 2:
            raise ValueError(f'SyncBatchNorm expected at least 2D input, got {x.dim()}D')

    def forward(self, x: Tensor) -> Tensor:
        if x.device.type != 'cpu':
            return self._torch_sync_forward(x)
        group = self.process_group or (dist.group.WORLD if dist.is_initialized() else None)
        if not (self.training and group is not None and dist.get_world_size(group) > 1):
            return super().forward(x)  # plain BatchNorm, as nn.BatchNorm2d runs it
        self._check_input_dim(x)
        mean, var, count = sync_batch_stats(x, group)
        if self.track_running_stats:
            self._update_running_stats(mean.detach(), var.detach(), count)
        shape = [1, -1] + [1] * (x.dim() - 2)
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y

    @torch.no_grad()
    def _update_running_stats(self, mean: Tensor, var: Tensor, count: float) -> None:
        self.num_batches_tracked.add_(1)
        factor = (1.0 / self.num_batches_tracked.item() if self.momentum is None
                  else self.momentum)
        unbiased = var * count / max(count - 1, 1)
        self.running_mean.mul_(1 - factor).add_(mean.to(self.running_mean.dtype), alpha=factor)
        self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)


def convert_sync_bn(module: nn.Module, process_group: Optional[object] = None) -> nn.Module:
    """Replace every BatchNorm layer of `module` by `SyncBatchNorm`, sharing its tensors.

    As `nn.SyncBatchNorm.convert_sync_batchnorm` does: parameters and buffers are the same
    objects, the training flag is kept. Returns the converted module (a new one if `module`
    itself is a BatchNorm layer).
    """
    if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
        new = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group)
        if module.affine:
            new.weight, new.bias = module.weight, module.bias
        new.running_mean, new.running_var = module.running_mean, module.running_var
        new.num_batches_tracked = module.num_batches_tracked
        new.train(module.training)
        return new
    for name, child in module.named_children():
        module.add_module(name, convert_sync_bn(child, process_group))
    return module
