"""SimCLR (Chen et al. 2020) with lightly's projection head and NT-Xent loss."""
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from lightly.loss import NTXentLoss
from lightly.models.modules import SimCLRProjectionHead
from mmengine.registry import MODELS
from torch import Tensor

from .base import EncoderModel


def positive_accuracy(z_a: Tensor, z_b: Tensor) -> Tensor:
    """Share of rows of z_a whose most similar other local embedding is its positive z_b[i]."""
    with torch.no_grad():
        n = z_a.shape[0]
        sim = z_a @ torch.cat([z_a, z_b]).t()  # (N, 2N)
        sim[:, :n].fill_diagonal_(float('-inf'))
        return (sim.argmax(1) == torch.arange(n, n * 2, device=z_a.device)).float().mean()


@MODELS.register_module()
class SimCLR(EncoderModel):
    """SimCLR: one encoder, both views in one forward pass, NT-Xent over all processes' batches.

    Args:
        backbone: Keyword arguments of `build_resnet`.
        feature_dim: Output dimension of the projection head.
        temperature: tau of NT-Xent (0.5 in the MixCo authors' SimCLR scripts).
        data_preprocessor: mmengine data preprocessor config.
        init_cfg: mmengine init config.
    """

    def __init__(self,
                 backbone: Optional[dict] = None,
                 feature_dim: int = 128,
                 temperature: float = 0.5,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(backbone, data_preprocessor, init_cfg)
        if temperature <= 0:
            raise ValueError(f'model.temperature must be > 0, got {temperature}')
        dim = self.backbone.feature_dim
        self.projection_head = SimCLRProjectionHead(dim, dim, feature_dim)
        # Negatives come from every process; lightly's gather keeps gradients correct.
        self.criterion = NTXentLoss(temperature=temperature, gather_distributed=True)
        self.temperature = temperature

    def embed(self, x: Tensor) -> Tensor:
        """Normalised projections (N, D) with gradient."""
        return F.normalize(self.projection_head(self.backbone(x)), dim=1)

    def contrast(self, x_a: Tensor, x_b: Tensor) -> Dict[str, Tensor]:
        """Loss terms of one step (MixCo overrides this)."""
        z_a, z_b = self.embed(torch.cat([x_a, x_b])).chunk(2)  # (B, D) each
        return dict(loss_inst=self.criterion(z_a, z_b), acc_inst=positive_accuracy(z_a, z_b))

    def loss(self, inputs: List[Tensor], data_samples=None) -> Dict[str, Tensor]:
        """One training step's loss dict from the two augmented views."""
        x_a, x_b = inputs
        return self.contrast(x_a, x_b)
