"""channels_last (NHWC) memory format for a model and the images it is fed: `ChannelsLastHook`.

Convolutions and BatchNorm in NHWC skip layout conversions on tensor-core GPUs (cuDNN's fast
kernels are NHWC) and on oneDNN CPUs. Switch it on with `custom_hooks += [dict(type=
'ChannelsLastHook')]` (configs/*_fast.py do). The hook converts the model's 4-D parameters and
buffers once, before the first step (and before a resume loads the optimizer state), and adds a
forward pre-hook that converts the 4-D image batches the model receives, after the data
preprocessor, so GPU-side augmentation in a preprocessor is converted as well.

NOTE: a hook runs after mmengine has wrapped the model in DDP, so DDP's gradient buckets were laid
out for the old (NCHW) strides; DDP rebuilds its buckets once, after the first iteration, from
the parameters' current strides, so only the first iteration copies gradients between layouts.
Values are unchanged: only strides differ. Checkpoints load into NCHW models and back.
"""
from typing import Any, Dict, Tuple

import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS
from torch import Tensor, nn

_HANDLE = '_channels_last_pre_hook'


def to_channels_last(data: Any) -> Any:
    """4-D floating tensors (also inside lists, tuples, dicts) in channels_last; others as is."""
    if isinstance(data, Tensor):
        return (data.contiguous(memory_format=torch.channels_last)
                if data.dim() == 4 and data.is_floating_point() else data)
    if isinstance(data, (list, tuple)):
        return type(data)(to_channels_last(x) for x in data)
    if isinstance(data, dict):
        return {key: to_channels_last(value) for key, value in data.items()}
    return data


def _inputs_to_channels_last(module: nn.Module, args: Tuple, kwargs: Dict) -> Tuple[Tuple, Dict]:
    """Forward pre-hook: the `inputs` of mmengine's forward(inputs, data_samples, mode)."""
    if args:
        return (to_channels_last(args[0]), *args[1:]), kwargs
    if 'inputs' in kwargs:
        kwargs = dict(kwargs, inputs=to_channels_last(kwargs['inputs']))
    return args, kwargs


def use_channels_last(model: nn.Module) -> nn.Module:
    """Convert `model` in place to channels_last and convert its image inputs on every forward.

    Calling it again does nothing more. Parameters keep their identity (only `.data` changes),
    so an optimizer built before still holds them.

    Args:
        model: An mmengine model (forward(inputs, data_samples, mode)) or any module taking the
            image batch first; not a DDP wrapper (pass `.module`).

    Returns:
        The same module.
    """
    model.to(memory_format=torch.channels_last)
    if getattr(model, _HANDLE, None) is None:
        setattr(model, _HANDLE, model.register_forward_pre_hook(_inputs_to_channels_last,
                                                                with_kwargs=True))
    return model


@HOOKS.register_module()
class ChannelsLastHook(Hook):
    """Put the runner's model and its image inputs in channels_last before training starts."""

    priority = 'VERY_HIGH'  # before_run: before the checkpoint hooks and any resume

    def before_run(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        use_channels_last(model)
