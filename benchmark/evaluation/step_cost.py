"""What one training step costs per source image, counted on a real step: the images it passes
through the model's encoders (with a gradient and without) and the FLOPs of its matrix products
and convolutions, forward and backward (torch.utils.flop_counter.FlopCounterMode).

The speed harness turns these counts into floors (benchmark/harness/speed/floor.py, whose table
says what each method passes); `evaluate_run` counts one step of each run once, after training,
on a copy of its model and a batch of its training loader (`training_step_cost`), and the run's
record keeps the count under ``extra.compute``: the leaderboard only reads it.
"""
import contextlib
import copy
import random
from typing import Callable, ContextManager, Iterator, Optional, Tuple

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode


def encoder_images(model: torch.nn.Module, step: Callable[[], object],
                   batch: int) -> Tuple[float, float]:
    """(images with gradient, images without) per source image that `step()` passes through
    the model's encoders: the outermost modules of its backbone's class (a key encoder is a
    copy of it), counted by forward hooks; an image has a gradient where the encoder's output
    carries one (a frozen encoder's pass is a key's, with or without no_grad).

    Raises:
        ValueError: Where no image passed through an encoder with a gradient (no floor).
    """
    kind, counts = type(model.backbone), [0, 0]
    found = [m for m in model.modules() if type(m) is kind]
    inner = {id(d) for m in found for d in m.modules() if d is not m}

    def count(module, args, kwargs, output) -> None:
        images = args[0] if args else next(iter(kwargs.values()))
        counts[0 if getattr(output, 'requires_grad', False) else 1] += images.shape[0]
    hooks = [m.register_forward_hook(count, with_kwargs=True) for m in found
             if id(m) not in inner]
    try:
        step()
    finally:
        for hook in hooks:
            hook.remove()
    if not counts[0]:
        raise ValueError(f'{type(model).__name__}: no image passed through its encoders '
                         f'({kind.__name__}) with a gradient in a step')
    return counts[0] / batch, counts[1] / batch


def pass_units(images: Tuple[float, float]) -> float:
    """Encoder forward units per source image: 3 per image with gradient, 1 per key."""
    grad, keys = images
    return 3 * grad + keys


def count_flops(fn) -> int:
    """FLOPs (2 per multiply-add) of the matrix products and convolutions fn() runs, backward
    included when fn() calls it; elementwise work is not counted."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


@contextlib.contextmanager
def kept_rng(device: torch.device) -> Iterator[None]:
    """The random generators (torch's on the host and on `device`, numpy's, Python's) as they
    were before the block, whatever it draws."""
    devices = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == 'cuda' else []
    host, legacy = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(host)
        np.random.set_state(legacy)


def training_step_cost(model: torch.nn.Module, batch,
                       context: Optional[Callable[[torch.nn.Module], ContextManager]] = None
                       ) -> dict:
    """One training step of `model` on `batch` (a batch of its training loader, as mmengine
    gives it to the model), counted on a copy of the model in training mode: its data
    preprocessor draws the views, then the loss (inside `context(copy)`: the run's optimizer
    wrapper's ``optim_context``, its autocast) and its backward run as in training (no
    optimizer step). The model itself (weights, BatchNorm statistics, queue) and the random
    generators are left as they were.

    Returns: per source image (B = the step's batch) the images through the encoders with a
    gradient and without, their sum (``encoder_passes``), the forward units (3 per image with
    gradient, 1 without) and the step's FLOPs; with B.
    """
    device = next(model.parameters()).device
    with kept_rng(device):
        twin = copy.deepcopy(model).train()
        data = twin.data_preprocessor(batch, True)
        inputs = data['inputs']
        size = (inputs[0] if isinstance(inputs, (list, tuple)) else inputs).shape[0]

        def step() -> None:
            with (context or (lambda _: contextlib.nullcontext()))(twin):
                loss, _ = twin.parse_losses(twin(**data, mode='loss'))
            loss.backward()
        images = []
        flops = count_flops(lambda: images.append(encoder_images(twin, step, size)))
        del twin
    grad, keys = images[0]
    return dict(batch=int(size), images_with_grad=grad, images_without_grad=keys,
                encoder_passes=grad + keys, pass_units=pass_units((grad, keys)),
                flops_per_image=flops / size)


def run_compute(step: dict, info: dict) -> dict:
    """The run's total training compute from its counted step (`training_step_cost`) and its
    RunInfoHook facts (`info`): the images trained on across processes (this process's count
    times the world size: every process draws as many batches), their FLOPs (the step's per
    image, times those images) and the device-seconds of its training epochs (their summed
    wall time times the processes). A count the run lacks (a resume from a checkpoint that did
    not count its images, no epoch timed) is None."""
    world, local = info.get('world_size') or 1, info.get('images_trained')
    images = None if local is None else int(local) * int(world)
    seconds = info.get('epoch_seconds') or []
    return dict(train_images=images,
                train_flops=None if images is None else step['flops_per_image'] * images,
                device_seconds=sum(seconds) * world if seconds else None, processes=world)
