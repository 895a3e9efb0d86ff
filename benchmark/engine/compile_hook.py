"""torch.compile for the encoders only: `CompileHook`.

mmengine's own switch (`compile = True` in a config) compiles the model's whole `train_step`,
the optimizer wrapper's autocast context included. On torch 2.11 (a GPU image's) with the
bfloat16 AMP wrapper that fails while dynamo traces mmengine's torch-version check
(`digit_version` -> packaging's InvalidVersion: "'UserDefinedExceptionObjectVariable' object
has no attribute 'call_setattr'"); torch 2.14 traces it. The convolutional encoders are where
the time goes, so this hook compiles just them, in place (`nn.Module.compile`: the parameter
names, hence checkpoints and resume, are unchanged), after ChannelsLastHook has converted them.
Switch it on in a config that extends another (a config file does not see its base's keys
as names, so `custom_hooks += [...]` fails; `_base_.custom_hooks` is the base's list)::

    _base_ = ['./mocov2_r18_tiny_fast.py']
    custom_hooks = _base_.custom_hooks + [dict(type='CompileHook')]

`tools/benchmark_speed.py`'s `-compile` configurations measure it.
"""
from typing import List, Optional

from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from torch import nn
from torchvision.models import ResNet

from benchmark import dist
from benchmark.engine.step_graph import whole_step  # noqa: F401  (its former home; one place)


# torch.compile's modes (torch checks them only when it first compiles, seconds into a run).
COMPILE_MODES = ('default', 'reduce-overhead', 'max-autotune', 'max-autotune-no-cudagraphs')


def compile_encoders(model: nn.Module, **kwargs) -> List[str]:
    """`module.compile(**kwargs)` for every ResNet in `model` (query and key encoders); their
    names. Calling it again compiles nothing more."""
    names = []
    for name, module in model.named_modules():
        if isinstance(module, ResNet):
            if getattr(module, '_compiled_call_impl', None) is None:
                module.compile(**kwargs)
            names.append(name)
    return names


@HOOKS.register_module()
class CompileHook(Hook):
    """Compile the model's ResNet encoders before training starts.

    Args:
        mode, dynamic, fullgraph, backend, options: torch.compile's arguments (None: its default).
    """

    priority = 'LOW'  # before_run: after ChannelsLastHook (VERY_HIGH) converted the weights

    def __init__(self, mode: Optional[str] = None, dynamic: Optional[bool] = None,
                 fullgraph: bool = False, backend: str = 'inductor',
                 options: Optional[dict] = None) -> None:
        if mode is not None and mode not in COMPILE_MODES:
            raise ValueError(f"mode: unknown torch.compile mode {mode!r}; valid: "
                             f"{', '.join(map(repr, COMPILE_MODES))}")
        self.kwargs = dict(mode=mode, dynamic=dynamic, fullgraph=fullgraph, backend=backend,
                           options=options)
        self.kwargs = {k: v for k, v in self.kwargs.items() if v is not None}

    def before_run(self, runner) -> None:
        names = compile_encoders(dist.unwrap(runner.model), **self.kwargs)
        if not names:
            raise ValueError('CompileHook: the model has no ResNet encoder to compile')
        runner.logger.info(f'CompileHook: torch.compile({self.kwargs}) on {names}')
