"""The training iteration after the views as one device program.

`whole_step` is the iteration in the form a captured program replays: the forwards (the momentum
and queue updates in place), the losses, the backward, the optimizer step, and the gradients
zeroed in place. `StepGraph` captures it once as a CUDA graph (static input buffers, PyTorch's
whole-network capture recipe) and replays it with one launch per iteration. `StepGraphHook`
trains with it: ``custom_hooks = _base_.custom_hooks + [dict(type='StepGraphHook')]`` in a
config built on a ``*_fast.py`` one. CUDA only, one process; eager stays the default, and
`tools/benchmark_speed.py` times the graph beside the eager step (``-graph`` configurations).

Random draws inside the graph (mixing coefficients, permutations, shuffles) come from the
default CUDA generator, which the graph advances on every replay and a checkpoint saves;
autocast runs with its weight cache off, as capture requires. With ``lr_on_device`` the graph's
optimizer step reads each group's learning rate from a device tensor (`device_lr`), filled before
every replay, so a schedule changes it without a new capture.
"""
import contextlib
import copy
import functools
from typing import Callable, Dict, Iterable, Iterator, Optional, Sequence

import torch
from mmengine.hooks import Hook
from mmengine.optim import AmpOptimWrapper
from mmengine.registry import HOOKS, OPTIM_WRAPPERS, OPTIMIZERS
from torch import Tensor, nn
from torch.optim import Optimizer

from benchmark import dist
from benchmark.data.view_graph import side_stream_calls
from benchmark.engine.config.keywords import ConfigError, lookup
from benchmark.engine.rng_state import capture_rng_state, restore_rng_state


def whole_step(model: nn.Module, optimizer: Optimizer, inputs: Sequence[Tensor],
               dtype: Optional[torch.dtype] = None,
               data_samples: Optional[Tensor] = None) -> Dict[str, Tensor]:
    """One training iteration after the views: the forward and losses (under autocast to
    `dtype`, None: float32), the backward, the optimizer step, and the gradients zeroed in place
    (not set to None, so they keep their storage).

    Returns:
        The log variables, on the device (nothing is read back).
    """
    with torch.autocast(inputs[0].device.type, dtype=dtype, enabled=dtype is not None,
                        cache_enabled=False):
        _, log_vars = model.parse_losses(model(list(inputs), data_samples, mode='loss'))
    log_vars['loss'].backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    return log_vars


@contextlib.contextmanager
def device_lr(optimizer: Optimizer, lr: Optional[Sequence[Tensor]]) -> Iterator[None]:
    """Within it, the optimizer's steps read each group's learning rate from its 0-dim tensor in
    `lr` (SGD's fused form: its foreach form reads a tensor back to the host); the groups' own
    numbers come back after. None: nothing changes. A parameter with a gradient gets a momentum
    buffer of its own layout where it has none (zeros: SGD's first step where dampening is 0)
    or one of another layout (a copy), as the fused kernel requires."""
    saved = [dict(group) for group in optimizer.param_groups]
    for group, rate in zip(optimizer.param_groups, lr or ()):
        group.update(lr=rate, fused=True, foreach=False)
        for p in group['params'] if group['momentum'] else ():
            state = optimizer.state[p]
            buffer = state.get('momentum_buffer')
            if p.grad is not None and (buffer is None or buffer.stride() != p.stride()):
                state['momentum_buffer'] = (torch.zeros_like(p) if buffer is None
                                            else torch.empty_like(p).copy_(buffer))
    try:
        yield
    finally:
        for group, numbers in zip(optimizer.param_groups, saved):
            group.update({k: numbers[k] for k in ('lr', 'fused', 'foreach') if k in numbers})


class StepGraph:
    """`whole_step` captured as one CUDA graph, replayed by calling it with a batch of views.

    Building it runs `warmup` eager steps on `inputs` on a side stream (they create the
    gradients and the optimizer's state, and train the model as any step does; with 0 the
    optimizer must have its state already), then captures one step, which runs nothing; each
    call copies the views into the graph's input buffers and replays it.

    Args:
        model, optimizer: on one CUDA device, the model in training mode.
        inputs: a batch of views of the shape and layout every later batch has.
        dtype: autocast dtype of the forward (None: float32).
        warmup: eager steps before the capture.
        data_samples: a tensor of per-sample data (labels) of the batch, or None.
        lr: a 0-dim device tensor per parameter group that the captured step reads its
            learning rate from (`device_lr`; the caller fills them before each call), or None:
            the groups' learning rates are baked in.
    """

    def __init__(self, model: nn.Module, optimizer: Optimizer, inputs: Sequence[Tensor],
                 dtype: Optional[torch.dtype] = None, warmup: int = 3,
                 data_samples: Optional[Tensor] = None, lr: Optional[Sequence[Tensor]] = None):
        if not all(x.is_cuda for x in inputs):
            raise ValueError('StepGraph: the views must be CUDA tensors (a CUDA graph); '
                             'run the eager step elsewhere')
        if warmup < 0:
            raise ValueError(f'StepGraph: warmup must be >= 0, got {warmup}')
        self.model, self.optimizer, self.dtype, self.lr = model, optimizer, dtype, lr
        self.inputs = [x.detach().clone(memory_format=_layout(x)) for x in inputs]
        self.samples = None if data_samples is None else data_samples.detach().clone()
        step = functools.partial(whole_step, model, optimizer, self.inputs, dtype, self.samples)
        with device_lr(optimizer, lr):
            side_stream_calls(step, warmup, self.inputs[0].device)
        for p in model.parameters():  # a gradient of None would be the graph's own tensor
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
        self.graph = torch.cuda.CUDAGraph()
        with device_lr(optimizer, lr), torch.cuda.graph(self.graph,
                                                        capture_error_mode='thread_local'):
            logs = step()
        # detached: the captured autograd graph is not kept alive (nor its gradient nodes,
        # bound to the capture's stream, which a later capture would have to wait for)
        self.log_vars = {k: v.detach() for k, v in logs.items()}

    def __call__(self, inputs: Sequence[Tensor],
                 data_samples: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """One training step on `inputs`; the log variables (the graph's own buffers: the next
        call overwrites them)."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f'StepGraph: {len(inputs)} views given, the graph was captured '
                             f'with {len(self.inputs)}')
        for static, x in zip(self.inputs, inputs):
            static.copy_(x, non_blocking=True)
        if self.samples is not None:
            self.samples.copy_(data_samples, non_blocking=True)
        self.graph.replay()
        return self.log_vars


class GraphedTrainStep:
    """`model.train_step` with the step after the views replayed from a `StepGraph`.

    The views are drawn as the eager step draws them. While the optimizer has no state yet (the
    run's first step: SGD's first step differs from every later one) the step is mmengine's
    own. The graph is captured again whenever what it baked in changes: the epoch (a per-epoch
    schedule, MoCHi's warm-up), any number of the optimizer's groups (learning rate, momentum,
    weight decay), the optimizer, or the batch's shapes (a smaller last batch). With
    `lr_on_device` the learning rates are not baked in: the graph reads them from device
    tensors (`device_lr`) filled before each replay, and a new one needs no capture.
    Before a process's first capture, one throwaway step on copies of the model and optimizer
    (random state saved and restored) does the lazy initialisations capture forbids. The log
    variables are copied out of the graph's buffers, so hooks that keep them see each step's
    own values. A copy of the model (`copy.deepcopy`) gets a step of its own, with no graph.
    """

    def __init__(self, model: nn.Module, epoch: Callable[[], int],
                 lr_on_device: bool = False) -> None:
        self.model, self.epoch, self.lr_on_device = model, epoch, lr_on_device
        self.graph: Optional[StepGraph] = None
        self.key = None
        self.warm = False
        self.captures = 0
        self.lr: Optional[list] = None  # the device learning rates, one per group

    def __deepcopy__(self, memo) -> 'GraphedTrainStep':
        return GraphedTrainStep(copy.deepcopy(self.model, memo), self.epoch, self.lr_on_device)

    def __call__(self, data, optim_wrapper) -> Dict[str, Tensor]:
        optimizer, dtype = optim_wrapper.optimizer, autocast_dtype(optim_wrapper)
        if not optimizer.state:  # mmengine's step, its autograd graph not kept by the logs
            logs = type(self.model).train_step(self.model, data, optim_wrapper)
            return {k: v.detach() if torch.is_tensor(v) else v for k, v in logs.items()}
        with optim_wrapper.optim_context(self.model):
            data = self.model.data_preprocessor(data, True)
        inputs, samples = list(data['inputs']), data.get('data_samples')
        samples = samples if torch.is_tensor(samples) else None
        key = (self.epoch(), id(optimizer), dtype, _signature(inputs, samples),
               _numbers(optimizer, skip={'lr'} if self.lr_on_device else ()))
        if self.lr_on_device:  # a kernel each, no read back; the graph reads them on replay
            if self.lr is None or len(self.lr) != len(optimizer.param_groups):
                self.lr = [torch.zeros((), device=inputs[0].device)
                           for _ in optimizer.param_groups]
            for rate, group in zip(self.lr, optimizer.param_groups):
                rate.fill_(group['lr'])
        if self.graph is None or key != self.key:
            self.graph = None  # its memory goes back before the next capture
            if not self.warm:
                self._warm_up(optimizer, inputs, dtype, samples)
            self.graph = StepGraph(self.model, optimizer, inputs, dtype, warmup=0,
                                   data_samples=samples, lr=self.lr)
            self.key, self.captures = key, self.captures + 1
        return {k: v.clone() for k, v in self.graph(inputs, samples).items()}  # detached

    def _warm_up(self, optimizer: Optimizer, inputs, dtype, samples) -> None:
        rng = capture_rng_state()
        model, optimizer, lr = copy.deepcopy((self.model, optimizer, self.lr))
        step = functools.partial(whole_step, model, optimizer, inputs, dtype, samples)
        with device_lr(optimizer, lr):
            if inputs[0].is_cuda:
                side_stream_calls(step, 1, inputs[0].device)
            else:  # a model on the CPU: no stream
                step()
        restore_rng_state(rng)
        self.warm = True


def autocast_dtype(optim_wrapper) -> Optional[torch.dtype]:
    """The autocast dtype of an mmengine optimizer wrapper's steps (None: float32)."""
    if isinstance(optim_wrapper, AmpOptimWrapper):
        return optim_wrapper.cast_dtype or torch.float16
    return None


@HOOKS.register_module()
class StepGraphHook(Hook):
    """Train with the step after the views replayed from one CUDA graph (`GraphedTrainStep`).

    On a CUDA device in one process; elsewhere (a CPU, several processes) the step stays eager
    and the hook says so once. The config check (`check_config`) and the hook before training
    refuse what a captured step cannot do: gradient accumulation or clipping, a loss scaler
    (float16), an optimizer other than SGD, and hooks that read the step's intermediate tensors
    (the online linear probe).

    Args:
        lr_on_device: the graph reads the learning rates from device tensors (SGD's fused form)
            instead of baking them in, so a per-iteration schedule needs no capture per step.
    """

    priority = 'LOW'  # before_train: after ChannelsLastHook converted the weights

    def __init__(self, lr_on_device: bool = False) -> None:
        self.lr_on_device = lr_on_device
        self.step: Optional[GraphedTrainStep] = None  # the graphed step, while on CUDA

    @staticmethod
    def check_config(cfg: dict) -> None:
        """The config check's call (before a run starts): `refuse_step_graph`."""
        refuse_step_graph(cfg)

    def before_train(self, runner) -> None:
        refuse_step_graph(runner.cfg)
        model = runner.model
        device = next(model.parameters()).device
        if model is not dist.unwrap(model) or device.type != 'cuda':
            where = 'several processes' if model is not dist.unwrap(model) else device.type
            runner.logger.warning(f'StepGraphHook: the training step stays eager ({where}); '
                                  'the step graph runs on one CUDA device in one process')
            return
        self.step = model.train_step = GraphedTrainStep(model, lambda: runner.epoch,
                                                        self.lr_on_device)
        runner.logger.info('StepGraphHook: the training step replays one CUDA graph')

    def after_train(self, runner) -> None:
        runner.model.__dict__.pop('train_step', None)  # the class's eager step again
        if self.step is not None:
            self.step.graph = None  # the graph's memory goes back


def refuse_step_graph(cfg) -> None:
    """A one-line ConfigError for a config whose step a CUDA graph cannot replay."""
    spec = cfg.get('optim_wrapper') or {}
    if spec.get('accumulative_counts', 1) != 1:
        raise ConfigError('StepGraphHook: optim_wrapper.accumulative_counts must be 1 (a graph '
                         'replays whole steps); drop the hook or the accumulation')
    if spec.get('clip_grad'):
        raise ConfigError('StepGraphHook: optim_wrapper.clip_grad is not captured; drop the '
                         'hook or the clipping')
    wrapper = lookup(OPTIM_WRAPPERS, spec.get('type', 'OptimWrapper'), 'optim_wrapper')
    scale = spec.get('loss_scale', 'dynamic')
    if isinstance(wrapper, type) and issubclass(wrapper, AmpOptimWrapper) and not (
            isinstance(scale, dict) and scale.get('enabled') is False):
        raise ConfigError('StepGraphHook: a loss scaler reads the device every step; use '
                         "dtype='bfloat16' with loss_scale=dict(enabled=False)")
    optimizer = lookup(OPTIMIZERS, (spec.get('optimizer') or {}).get('type'),
                       'optim_wrapper.optimizer')
    if optimizer is not torch.optim.SGD:
        raise ConfigError(f'StepGraphHook: the optimizer is '
                         f'{getattr(optimizer, "__name__", optimizer)}; the step graph replays '
                         'SGD')
    if any(isinstance(h, dict) and h.get('type') == 'OnlineLinearProbeHook'
           for h in cfg.get('custom_hooks') or []):
        raise ConfigError('StepGraphHook: OnlineLinearProbeHook reads the features inside the '
                         'step, which a replay does not run; drop one of the two hooks')


def _signature(inputs: Sequence[Tensor], samples: Optional[Tensor]) -> tuple:
    """Shapes, strides and dtypes of a batch: a graph replays only its own."""
    return tuple((tuple(x.shape), x.stride(), x.dtype)
                 for x in [*inputs, *([] if samples is None else [samples])])


def _numbers(optimizer: Optimizer, skip: Iterable[str] = ()) -> tuple:
    """Every number of every parameter group (lr, momentum, ...) but those in `skip`: a graph
    bakes them in."""
    return tuple(tuple(sorted((k, v) for k, v in group.items()
                              if isinstance(v, (bool, int, float)) and k not in skip))
                 for group in optimizer.param_groups)


def _layout(x: Tensor) -> torch.memory_format:
    """channels_last for a 4-d tensor in that layout, else contiguous."""
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
            and not x.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format
