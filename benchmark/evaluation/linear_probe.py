"""The paper's linear evaluation: a linear classifier on a frozen encoder in eval mode.

MoCo's `main_lincls.py`, which the MixCo authors follow: every backbone parameter frozen, the
backbone kept in eval mode (BatchNorm uses and keeps the pretrained running statistics), and
only `fc` trained, initialised N(0, 0.01) with zero bias.
"""
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from mmengine.registry import MODELS
from torch import Tensor, nn

from benchmark.engine.checkpoints import load_backbone
from methods.base import EncoderModel


@MODELS.register_module()
class LinearProbe(EncoderModel):
    """Frozen pretrained backbone + trainable linear head, cross-entropy.

    Args:
        num_classes: Number of classes of the evaluation data.
        backbone: Keyword arguments of `build_resnet` (must match the checkpoint).
        checkpoint: Pretrained weights (our, the authors' or a torchvision layout), loaded
            strictly into the backbone at construction; None keeps the random init.
        data_preprocessor: mmengine data preprocessor config.
        init_cfg: mmengine init config.

    Raises:
        CheckpointMismatchError: If the checkpoint does not fit the backbone.
    """

    def __init__(self,
                 num_classes: int = 200,
                 backbone: Optional[dict] = None,
                 checkpoint: Optional[str] = None,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(backbone, data_preprocessor, init_cfg)
        if num_classes < 2:
            raise ValueError(f'model.num_classes must be >= 2, got {num_classes}')
        self.checkpoint_layout = load_backbone(self.backbone, checkpoint) if checkpoint else None
        self.backbone.requires_grad_(False)
        self.head = nn.Linear(self.backbone.feature_dim, num_classes)
        nn.init.normal_(self.head.weight, mean=0.0, std=0.01)  # as MoCo's main_lincls.py
        nn.init.zeros_(self.head.bias)
        self.train()

    def train(self, mode: bool = True) -> 'LinearProbe':
        """Set the head's mode; the backbone stays in eval mode (frozen BN statistics)."""
        super().train(mode)
        self.backbone.eval()
        return self

    def logits(self, inputs: Tensor) -> Tensor:
        """Class logits of shape (B, num_classes); no graph through the frozen backbone."""
        with torch.no_grad():
            features = self.backbone(inputs)  # (B, feature_dim)
        return self.head(features)  # (B, num_classes)

    def loss(self, inputs: Tensor, data_samples: Tensor = None) -> Dict[str, Tensor]:
        """Cross-entropy and top-1 accuracy of one labelled batch."""
        logits = self.logits(inputs)  # (B, num_classes)
        acc = (logits.detach().argmax(1) == data_samples).float().mean()
        return dict(loss_ce=F.cross_entropy(logits, data_samples), acc_top1=acc)

    def forward(self, inputs, data_samples=None, mode: str = 'tensor'):
        """mmengine entry point: 'loss' -> loss dict, 'predict' -> logits (B, num_classes),
        'tensor' -> pooled backbone features (B, feature_dim)."""
        if mode == 'predict':
            return self.logits(inputs)
        return super().forward(inputs, data_samples, mode)
