"""The training iteration after the views as one device program.

`whole_step` is the iteration in the form a captured program replays: the forwards (the momentum
and queue updates in place), the losses, the backward, the optimizer step, and the gradients
zeroed in place. `StepGraph` captures it once as a CUDA graph (static input buffers, PyTorch's
whole-network capture recipe) and replays it with one launch per iteration. CUDA only; eager
stays the default everywhere, and `tools/benchmark_speed.py` times the graph beside the eager
bare step on a GPU.

Random draws inside the graph (mixing coefficients, permutations, shuffles) come from the
default CUDA generator, which the graph advances on every replay; autocast runs with its weight
cache off, as capture requires.
"""
from typing import Dict, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.optim import Optimizer


def whole_step(model: nn.Module, optimizer: Optimizer, inputs: Sequence[Tensor],
               dtype: Optional[torch.dtype] = None) -> Dict[str, Tensor]:
    """One training iteration after the views: the forward and losses (under autocast to
    `dtype`, None: float32), the backward, the optimizer step, and the gradients zeroed in place
    (not set to None, so they keep their storage).

    Returns:
        The log variables, on the device (nothing is read back).
    """
    with torch.autocast(inputs[0].device.type, dtype=dtype, enabled=dtype is not None,
                        cache_enabled=False):
        _, log_vars = model.parse_losses(model(list(inputs), mode='loss'))
    log_vars['loss'].backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    return log_vars


class StepGraph:
    """`whole_step` captured as one CUDA graph, replayed by calling it with a batch of views.

    Building it runs `warmup` eager steps on `inputs` on a side stream (they create the
    gradients and the optimizer's state, and train the model as any step does), then captures
    one step; each call copies the views into the graph's input buffers and replays it.

    Args:
        model, optimizer: on one CUDA device, the model in training mode.
        inputs: a batch of views of the shape and layout every later batch has.
        dtype: autocast dtype of the forward (None: float32).
        warmup: eager steps before the capture (at least 1).
    """

    def __init__(self, model: nn.Module, optimizer: Optimizer, inputs: Sequence[Tensor],
                 dtype: Optional[torch.dtype] = None, warmup: int = 3):
        if not all(x.is_cuda for x in inputs):
            raise ValueError('StepGraph: the views must be CUDA tensors (a CUDA graph); '
                             'run the eager step elsewhere')
        if warmup < 1:
            raise ValueError(f'StepGraph: warmup must be >= 1, got {warmup}')
        self.model, self.optimizer, self.dtype = model, optimizer, dtype
        self.inputs = [x.detach().clone(memory_format=_layout(x)) for x in inputs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                whole_step(model, optimizer, self.inputs, dtype)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode='thread_local'):
            self.log_vars = whole_step(model, optimizer, self.inputs, dtype)

    def __call__(self, inputs: Sequence[Tensor]) -> Dict[str, Tensor]:
        """One training step on `inputs`; the log variables (the graph's own buffers: the next
        call overwrites them)."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f'StepGraph: {len(inputs)} views given, the graph was captured '
                             f'with {len(self.inputs)}')
        for static, x in zip(self.inputs, inputs):
            static.copy_(x, non_blocking=True)
        self.graph.replay()
        return self.log_vars


def _layout(x: Tensor) -> torch.memory_format:
    """channels_last for a 4-d tensor in that layout, else contiguous."""
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
            and not x.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format
