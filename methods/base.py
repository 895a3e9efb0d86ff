"""The mmengine model interface shared by every method: a backbone plus a loss."""
from collections import OrderedDict
from functools import reduce
from operator import add
from typing import Dict, Optional, Tuple

import torch
from mmengine.model import BaseModel
from torch import Tensor

from .backbones import build_resnet


class EncoderModel(BaseModel):
    """A ResNet backbone and a `loss(inputs, data_samples)` defined by each method.

    `forward(mode='loss')` returns the loss dict (mmengine sums the keys containing 'loss' and
    logs the rest); `mode='tensor'` returns pooled backbone features, which evaluation uses.

    Args:
        backbone: Keyword arguments of `build_resnet` (depth, small_stem).
        data_preprocessor: mmengine data preprocessor config; None: mmengine's
            `BaseDataPreprocessor` with ``non_blocking=True``, so that copying the batch to a
            GPU does not make the host wait for the device (mmengine's default copy does).
        init_cfg: mmengine init config.

    Attributes:
        first_pass_starts_with_first_view: Whether the first backbone pass of a training step
            holds the B images of the first view as its first B inputs (True), other images
            (False), or unknown (None). The online linear probe takes its features from that
            pass when True, runs its own pass when False, and compares the images (a read of
            the device every step) when None.
    """

    first_pass_starts_with_first_view: Optional[bool] = None

    def __init__(self,
                 backbone: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        if data_preprocessor is None:  # mmengine's, but the batch's copy does not wait
            data_preprocessor = dict(type='BaseDataPreprocessor', non_blocking=True)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.backbone = build_resnet(**(backbone or {}))

    def loss(self, inputs, data_samples=None) -> Dict[str, Tensor]:
        raise NotImplementedError

    def before_step(self) -> None:
        """Read the host-side state a training step depends on (MoCHi: the epoch), before the
        step runs; `forward(mode='loss')` calls it unless torch.compile is tracing, so that the
        traced step holds no such read (a compiled step calls it before the compiled code)."""

    def parse_losses(self, losses: Dict[str, Tensor]) -> Tuple[Tensor, Dict[str, Tensor]]:
        """mmengine's `parse_losses` without its device work on scalar terms: a term that is
        one number already is logged as it is (mmengine takes its mean, a copy), and the loss
        is the sum of the terms named '*loss*' in order (mmengine's starts from 0, one more
        addition). Same values, same gradients, two to four fewer operations per step."""
        log_vars = []
        for name, value in losses.items():
            if isinstance(value, Tensor):
                log_vars.append((name, value if value.dim() == 0 else value.mean()))
            elif isinstance(value, (list, tuple)) and all(isinstance(v, Tensor) for v in value):
                log_vars.append((name, sum(v.mean() for v in value)))
            else:
                raise TypeError(f'{name} is not a tensor or list of tensors')
        terms = [value for name, value in log_vars if 'loss' in name]
        loss = reduce(add, terms) if terms else 0
        return loss, OrderedDict([('loss', loss), *log_vars])

    def forward(self, inputs, data_samples=None, mode: str = 'tensor'):
        """mmengine entry point."""
        if mode == 'loss':
            if not torch.compiler.is_compiling():
                self.before_step()
            return self.loss(inputs, data_samples)
        if mode in ('tensor', 'predict'):
            return self.backbone(inputs[0] if isinstance(inputs, (list, tuple)) else inputs)
        raise RuntimeError(f'invalid mode {mode!r}; expected loss, tensor or predict')
