"""SimCLR (Chen et al. 2020) as the MixCo authors ran it (their simclr/ code), plus options.

The authors' step (defaults): each view goes through the encoder in its own forward pass, so
BatchNorm statistics are per pass; BatchNorm is synchronised across processes (statistics over
every process's copy of that pass); the projection head is Linear(bias) -> ReLU -> Linear(bias);
NT-Xent uses each process's local batch as negatives and averages over its 2N rows.
NOTE: lightly's SimCLR (this file's former behaviour) is `joint_forward=True`,
`head_batch_norm=True`, `gather_negatives=True`, `sync_bn=False`.
"""
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from lightly.loss import NTXentLoss
from lightly.models.modules import SimCLRProjectionHead
from lightly.utils import dist as lightly_dist
from mmengine.registry import MODELS
from torch import Tensor

from .base import EncoderModel
from .sync_bn import convert_sync_bn


def positive_accuracy(z_a: Tensor, z_b: Tensor) -> Tensor:
    """Share of rows of z_a whose most similar other local embedding is its positive z_b[i]."""
    with torch.no_grad():
        n = z_a.shape[0]
        sim = z_a @ torch.cat([z_a, z_b]).t()  # (N, 2N)
        sim[:, :n].fill_diagonal_(float('-inf'))
        return (sim.argmax(1) == torch.arange(n, n * 2, device=z_a.device)).float().mean()


class NTXent(NTXentLoss):
    """lightly's NT-Xent over in-batch negatives, equal to it bit for bit, without its boolean
    mask: lightly drops each row's own column with ``logits[~eye]``, an index whose size the
    host reads from the device (a wait every step on a GPU, and a graph break for
    torch.compile); here a gather with indices known from the shapes drops it. No memory bank.
    """

    def forward(self, out0: Tensor, out1: Tensor) -> Tensor:
        n = out0.shape[0]
        out0, out1 = F.normalize(out0, dim=1), F.normalize(out1, dim=1)
        rank, out0_large, out1_large = 0, out0, out1
        if self.gather_distributed and lightly_dist.world_size() > 1:
            out0_large = torch.cat(lightly_dist.gather(out0), 0)
            out1_large = torch.cat(lightly_dist.gather(out1), 0)
            rank = lightly_dist.rank()
        own = torch.arange(n, device=out0.device) + rank * n  # (n,): row i's own column
        others = torch.arange(out0_large.shape[0] - 1, device=out0.device)[None]  # (1, m - 1)
        others = others + (others >= own[:, None]).long()  # (n, m - 1): every column but own
        logits_00 = (torch.einsum('nc,mc->nm', out0, out0_large) / self.temperature).gather(1, others)
        logits_01 = torch.einsum('nc,mc->nm', out0, out1_large) / self.temperature
        logits_10 = torch.einsum('nc,mc->nm', out1, out0_large) / self.temperature
        logits_11 = (torch.einsum('nc,mc->nm', out1, out1_large) / self.temperature).gather(1, others)
        logits = torch.cat([torch.cat([logits_01, logits_00], 1),
                            torch.cat([logits_10, logits_11], 1)], 0)  # (2n, 2m - 1)
        labels = torch.arange(n, device=out0.device) + (rank * n if self.gather_distributed else 0)
        return self.cross_entropy(logits, labels.repeat(2))


@MODELS.register_module()
class SimCLR(EncoderModel):
    """SimCLR: one encoder, NT-Xent between the projections of two views.

    Args:
        backbone: Keyword arguments of `build_resnet`.
        feature_dim: Output dimension of the projection head.
        temperature: tau of NT-Xent (0.5 in the MixCo authors' SimCLR scripts).
        joint_forward: One encoder pass over all of a step's batches (views a and b, and in
            MixCo the mixed ones); False (authors): one pass per batch.
        head_batch_norm: lightly's head Linear -> BN -> ReLU -> Linear -> BN without biases;
            False (authors): Linear(bias) -> ReLU -> Linear(bias).
        gather_negatives: NT-Xent over the embeddings of all processes (lightly's gather);
            False (authors): each process's local batch only.
        sync_bn: BatchNorm statistics over all processes (`methods.sync_bn`; plain
            BatchNorm with one process); False: each process's own batch.
        data_preprocessor: mmengine data preprocessor config.
        init_cfg: mmengine init config.
    """

    first_pass_starts_with_first_view = True  # the first pass starts with x_a

    def __init__(self,
                 backbone: Optional[dict] = None,
                 feature_dim: int = 128,
                 temperature: float = 0.5,
                 joint_forward: bool = False,
                 head_batch_norm: bool = False,
                 gather_negatives: bool = False,
                 sync_bn: bool = True,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(backbone, data_preprocessor, init_cfg)
        if feature_dim < 1:
            raise ValueError(f'model.feature_dim must be >= 1, got {feature_dim}')
        if temperature <= 0:
            raise ValueError(f'model.temperature must be > 0, got {temperature}')
        dim = self.backbone.feature_dim
        self.projection_head = SimCLRProjectionHead(dim, dim, feature_dim,
                                                    batch_norm=head_batch_norm)
        if sync_bn:  # the authors' convert_sync_batchnorm(model)
            self.backbone = convert_sync_bn(self.backbone)
            self.projection_head = convert_sync_bn(self.projection_head)
        # lightly's gather keeps gradients correct across processes.
        self.criterion = NTXent(temperature=temperature, gather_distributed=gather_negatives)
        self.temperature = temperature
        self.joint_forward = joint_forward

    def embed(self, x: Tensor) -> Tensor:
        """Normalised projections (N, D) with gradient, in one encoder pass."""
        return F.normalize(self.projection_head(self.backbone(x)), dim=1)

    def embed_passes(self, batches: Sequence[Tensor],
                     passes: Sequence[Sequence[int]]) -> List[Tensor]:
        """Embed batches in the given grouping of encoder passes.

        Args:
            batches: The step's batches, e.g. [x_a, x_b].
            passes: Indices into `batches`, one list per forward pass, run in this order; the
                batches of one pass share its BatchNorm statistics, e.g. [[0], [1]] or [[0, 1]].

        Returns:
            The normalised projections of `batches[i]` at position i.
        """
        out: List[Optional[Tensor]] = [None] * len(batches)
        for group in passes:
            z = self.embed(torch.cat([batches[i] for i in group]))  # (sum of sizes, D)
            for i, z_i in zip(group, z.split([batches[i].shape[0] for i in group])):
                out[i] = z_i
        return out

    def contrast(self, x_a: Tensor, x_b: Tensor) -> Dict[str, Tensor]:
        """Loss terms of one step (MixCo overrides this)."""
        passes = [[0, 1]] if self.joint_forward else [[0], [1]]
        z_a, z_b = self.embed_passes([x_a, x_b], passes)  # (B, D) each
        return dict(loss_inst=self.criterion(z_a, z_b), acc_inst=positive_accuracy(z_a, z_b))

    def loss(self, inputs: List[Tensor], data_samples=None) -> Dict[str, Tensor]:
        """One training step's loss dict from the two augmented views."""
        x_a, x_b = inputs
        return self.contrast(x_a, x_b)
