"""channels_last (NHWC) memory format for a model and the images it is fed: `ChannelsLastHook`.

Convolutions and BatchNorm in NHWC skip layout conversions on tensor-core GPUs (cuDNN's fast
kernels are NHWC) and on oneDNN CPUs. Switch it on with `custom_hooks = _base_.custom_hooks +
[dict(type='ChannelsLastHook')]` in a config (configs/*_fast.py list it in their hooks). The hook converts the model's 4-D parameters and
buffers once, before the first step (and before a resume loads the optimizer state), and adds a
forward pre-hook that converts the 4-D image batches the model receives, after the data
preprocessor, so GPU-side augmentation in a preprocessor is converted as well.

Distributed runs: hooks run after mmengine has wrapped the model in DDP, whose gradient buckets
are then laid out for the old (NCHW) strides until DDP rebuilds them after the first iteration.
That first iteration computes differently from the later ones, and a resumed run has its own
first iteration, so a run killed and resumed was not bit-identical to an uninterrupted one
(found with tools/kill_resume.py on the fast configs over torchrun; one process without DDP was
identical). `use_channels_last_wrapper` (called where the Runner is built) therefore has DDP
wrap a model that is already NHWC, through `ChannelsLastDistributedDataParallel`; the hook then
finds the model converted and changes nothing. Values are unchanged by the layout: only strides
differ. Checkpoints load into NCHW models and back.
"""
from typing import Any, Dict, Tuple

import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.model import MMDistributedDataParallel, is_model_wrapper
from mmengine.registry import HOOKS, MODEL_WRAPPERS
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


@MODEL_WRAPPERS.register_module()
class ChannelsLastDistributedDataParallel(MMDistributedDataParallel):
    """mmengine's MMDistributedDataParallel around a model converted to channels_last first, so
    DDP lays out its gradient buckets for the NHWC strides from the start (see the module doc)."""

    def __init__(self, module: nn.Module, **kwargs) -> None:
        use_channels_last(module)
        super().__init__(module=module, **kwargs)


_DDP_TYPES = ('MMDistributedDataParallel', MMDistributedDataParallel)


def use_channels_last_wrapper(cfg: Config) -> None:
    """With a ChannelsLastHook in ``cfg.custom_hooks``, make a distributed run wrap the model in
    `ChannelsLastDistributedDataParallel` (mmengine's defaults kept: ``broadcast_buffers=False``,
    the config's ``find_unused_parameters``). One-process runs never read ``model_wrapper_cfg``.

    Raises:
        ValueError: The config names another model wrapper, which this cannot convert for.
    """
    if not any(isinstance(h, dict) and h.get('type') in ('ChannelsLastHook', ChannelsLastHook)
               for h in cfg.get('custom_hooks') or []):
        return
    wrapper = dict(cfg.get('model_wrapper_cfg') or {})
    kind = wrapper.get('type', 'MMDistributedDataParallel')
    if kind not in _DDP_TYPES + ('ChannelsLastDistributedDataParallel',
                                 ChannelsLastDistributedDataParallel):
        raise ValueError(f'model_wrapper_cfg.type={kind!r} with ChannelsLastHook: the hook needs '
                         f'MMDistributedDataParallel (converted before wrapping); remove one')
    wrapper['type'] = 'ChannelsLastDistributedDataParallel'
    wrapper.setdefault('broadcast_buffers', False)
    wrapper.setdefault('find_unused_parameters', cfg.get('find_unused_parameters', False))
    cfg.model_wrapper_cfg = wrapper
