"""MoCo-v2 (He et al. 2020; Chen et al. 2020) as an mmengine model.

The queue is a persistent buffer (K x D plus a pointer) so that checkpoints carry it; keys come
from a momentum copy of the encoder updated with lightly's `update_momentum`, with lightly's
shuffle-BN across processes when more than one process runs.
"""
import copy
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from lightly.models.modules import MoCoProjectionHead
from lightly.models.utils import batch_shuffle, batch_unshuffle, update_momentum
from mmengine.dist import all_gather, get_world_size
from mmengine.registry import MODELS
from torch import Tensor, nn

from .base import EncoderModel
from .precision import at_least_float32, float32_region


def info_nce(q: Tensor, k: Tensor, queue: Tensor, temperature: float) -> Tuple[Tensor, Tensor]:
    """MoCo's InfoNCE: the positive is column 0, the queue holds the negatives.

    Args:
        q: Queries (B, D), L2-normalised.
        k: Keys (B, D), L2-normalised, no gradient.
        queue: Negatives (K, D).
        temperature: tau.

    Returns:
        (loss, top-1 accuracy of picking the positive), float32 also under autocast.
    """
    with float32_region(q):  # logits in float32 whatever the encoders' precision
        q, k, queue = map(at_least_float32, (q, k, queue))
        l_pos = (q * k).sum(1, keepdim=True)  # (B, 1)
        l_neg = q @ queue.t()  # (B, K)
        logits = torch.cat([l_pos, l_neg], 1) / temperature  # (B, 1 + K)
        labels = torch.zeros(q.shape[0], dtype=torch.long, device=q.device)
        loss = F.cross_entropy(logits, labels)
    acc = (logits.detach().argmax(1) == 0).float().mean()
    return loss, acc


@MODELS.register_module()
class MoCo(EncoderModel):
    """MoCo-v2: query encoder, momentum key encoder, queue of keys, InfoNCE.

    Args:
        backbone: Keyword arguments of `build_resnet` (depth, small_stem).
        feature_dim: Output dimension of the projection head (128 in MoCo-v2).
        queue_size: K, number of negatives kept; need not divide the batch (it wraps around)
            but must be at least the total batch of all processes.
        key_momentum: m of the MoCo paper: key = m * key + (1 - m) * query (0.999).
        temperature: tau of InfoNCE (0.2 in MoCo-v2 and the MixCo authors' scripts).
        head_batch_norm: BatchNorm in the projection head (MoCo-v3 style; False in MoCo-v2 and
            the paper). Only the digits demo turns it on, to learn within minutes.
        data_preprocessor: mmengine data preprocessor config.
        init_cfg: mmengine init config.
    """

    def __init__(self,
                 backbone: Optional[dict] = None,
                 feature_dim: int = 128,
                 queue_size: int = 65536,
                 key_momentum: float = 0.999,
                 temperature: float = 0.2,
                 head_batch_norm: bool = False,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(backbone, data_preprocessor, init_cfg)
        if queue_size < 1:
            raise ValueError(f'model.queue_size must be >= 1, got {queue_size}')
        if not 0 <= key_momentum < 1:
            raise ValueError(f'model.key_momentum must be in [0, 1), got {key_momentum}')
        if temperature <= 0:
            raise ValueError(f'model.temperature must be > 0, got {temperature}')
        dim = self.backbone.feature_dim
        self.projection_head = MoCoProjectionHead(dim, dim, feature_dim, batch_norm=head_batch_norm)
        self.backbone_momentum = copy.deepcopy(self.backbone)
        self.projection_head_momentum = copy.deepcopy(self.projection_head)
        for param in self.momentum_parameters():
            param.requires_grad = False
        self.key_momentum = key_momentum
        self.temperature = temperature
        self.register_buffer('queue', F.normalize(torch.randn(queue_size, feature_dim), dim=1))
        self.register_buffer('queue_ptr', torch.zeros((), dtype=torch.long))

    def momentum_parameters(self) -> List[nn.Parameter]:
        """Parameters of the key encoder (never trained by the optimizer)."""
        return [*self.backbone_momentum.parameters(), *self.projection_head_momentum.parameters()]

    def embed_query(self, x: Tensor) -> Tensor:
        """Normalised query projections (N, D), float32 (also under autocast), with gradient."""
        return F.normalize(at_least_float32(self.projection_head(self.backbone(x))), dim=1)

    @torch.no_grad()
    def embed_keys(self, x: Tensor) -> Tensor:
        """Momentum-update the key encoder, then normalised float32 keys (N, D) with shuffle-BN."""
        update_momentum(self.backbone, self.backbone_momentum, self.key_momentum)
        update_momentum(self.projection_head, self.projection_head_momentum, self.key_momentum)
        distributed = get_world_size() > 1
        if distributed:  # shuffle-BN: BN statistics of a key batch come from other samples
            x, shuffle = batch_shuffle(x, distributed=True)
        k = self.projection_head_momentum(self.backbone_momentum(x))  # (N, D)
        if distributed:
            k = batch_unshuffle(k, shuffle, distributed=True)
        return F.normalize(at_least_float32(k), dim=1)  # the float32 queue stores them as they are

    @torch.no_grad()
    def enqueue(self, keys: Tensor) -> None:
        """Write the keys of every process at the pointer, wrapping around the end of the queue."""
        keys = torch.cat(all_gather(keys.contiguous()), 0)  # (B_total, D)
        size = self.queue.shape[0]
        if keys.shape[0] > size:
            raise ValueError(f'model.queue_size={size} is smaller than the total batch '
                             f'{keys.shape[0]}; raise queue_size or lower the batch')
        idx = (self.queue_ptr + torch.arange(keys.shape[0], device=keys.device)) % size
        self.queue[idx] = keys.to(self.queue.dtype)
        self.queue_ptr.copy_((self.queue_ptr + keys.shape[0]) % size)

    def contrast(self, x_q: Tensor, x_k: Tensor, queue: Tensor) -> Tuple[Dict[str, Tensor], Tensor]:
        """Loss terms of one step and the keys to enqueue (MixCo overrides this)."""
        q = self.embed_query(x_q)  # (B, D)
        k = self.embed_keys(x_k)  # (B, D)
        loss, acc = info_nce(q, k, queue, self.temperature)
        return dict(loss_inst=loss, acc_inst=acc), k

    def loss(self, inputs: List[Tensor], data_samples=None) -> Dict[str, Tensor]:
        """One training step's loss dict from the two augmented views."""
        x_q, x_k = inputs
        queue = self.queue.clone().detach()  # one snapshot, read before this step's keys enter
        losses, keys = self.contrast(x_q, x_k, queue)
        self.enqueue(keys)
        return losses
