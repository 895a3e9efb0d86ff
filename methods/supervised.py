"""Supervised baseline of the paper's Table 1: the same backbone, a linear classifier, CE."""
from typing import Dict, Optional

import torch.nn.functional as F
from mmengine.registry import MODELS
from torch import Tensor, nn

from .base import EncoderModel


@MODELS.register_module()
class Supervised(EncoderModel):
    """Backbone + linear classifier trained end to end with cross-entropy.

    Args:
        num_classes: Number of classes (200 for Tiny-ImageNet).
        backbone: Keyword arguments of `build_resnet`.
        data_preprocessor: mmengine data preprocessor config.
        init_cfg: mmengine init config.
    """

    first_pass_starts_with_first_view = True  # one pass over the one view

    def __init__(self,
                 num_classes: int = 200,
                 backbone: Optional[dict] = None,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(backbone, data_preprocessor, init_cfg)
        if num_classes < 2:
            raise ValueError(f'model.num_classes must be >= 2, got {num_classes}')
        self.classifier = nn.Linear(self.backbone.feature_dim, num_classes)

    def loss(self, inputs: Tensor, data_samples: Tensor = None) -> Dict[str, Tensor]:
        """Cross-entropy and top-1 accuracy of one labelled batch."""
        logits = self.classifier(self.backbone(inputs))  # (B, num_classes)
        acc = (logits.detach().argmax(1) == data_samples).float().mean()
        return dict(loss_ce=F.cross_entropy(logits, data_samples), acc_top1=acc)
