"""The mmengine model interface shared by every method: a backbone plus a loss."""
from typing import Dict, Optional

from mmengine.model import BaseModel
from torch import Tensor

from .backbones import build_resnet


class EncoderModel(BaseModel):
    """A ResNet backbone and a `loss(inputs, data_samples)` defined by each method.

    `forward(mode='loss')` returns the loss dict (mmengine sums the keys containing 'loss' and
    logs the rest); `mode='tensor'` returns pooled backbone features, which evaluation uses.

    Args:
        backbone: Keyword arguments of `build_resnet` (depth, small_stem).
        data_preprocessor: mmengine data preprocessor config.
        init_cfg: mmengine init config.
    """

    def __init__(self,
                 backbone: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.backbone = build_resnet(**(backbone or {}))

    def loss(self, inputs, data_samples=None) -> Dict[str, Tensor]:
        raise NotImplementedError

    def forward(self, inputs, data_samples=None, mode: str = 'tensor'):
        """mmengine entry point."""
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode in ('tensor', 'predict'):
            return self.backbone(inputs[0] if isinstance(inputs, (list, tuple)) else inputs)
        raise RuntimeError(f'invalid mode {mode!r}; expected loss, tensor or predict')
