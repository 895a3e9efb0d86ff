"""MoCo-v2 (He et al. 2020; Chen et al. 2020) as an mmengine model.

The queue is a persistent buffer (K x D plus a pointer) so that checkpoints carry it; keys come
from a momentum copy of the encoder updated with lightly's `update_momentum`, with shuffle-BN
(MoCo paper, sec. 3.3): lightly's shuffle across processes when several run, and in one process
its emulation by groups (`forward_in_groups`), as the MoCo authors' CIFAR demo does.
"""
import copy
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from lightly.models.modules import MoCoProjectionHead
from lightly.models.utils import batch_shuffle, batch_unshuffle, update_momentum
from mmengine.dist import all_gather, get_world_size
from mmengine.registry import MODELS
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from .base import EncoderModel
from .precision import at_least_float32, float32_region

SHUFFLE_BN_MODES = ('auto', 'split', 'off')


@torch.no_grad()
def forward_in_groups(modules: Sequence[nn.Module], x: Tensor, groups: int) -> Tensor:
    """Run `modules` in turn on each of `groups` equal consecutive slices of `x`, separately.

    Each BatchNorm layer in training mode normalises a slice with that slice's own statistics,
    as `groups` processes holding one slice each would. Every slice updates the running
    statistics from the layer's values before the call, as each process updates its own; the
    layer then keeps the mean over the slices of the updated values (the MoCo CIFAR demo's
    choice: the running mean is the one a single pass over the whole batch would give) and
    counts one batch. A run over processes checkpoints process 0's values instead, those of one
    random slice per step; the suite's training and evaluation never read the key encoder's
    running statistics (evaluation uses the query encoder).

    Args:
        modules: The encoder's parts, applied one after the other (backbone, head).
        x: Batch (B, ...), B divisible by `groups`.
        groups: Number of slices.

    Returns:
        The outputs (B, ...) of the slices, in the order of `x`.
    """
    if x.shape[0] % groups:
        raise ValueError(f'model.bn_splits={groups} must divide the key batch, got '
                         f'{x.shape[0]} images; use a batch divisible by {groups} (and '
                         f'drop_last=True)')
    layers = [m for module in modules for m in module.modules()
              if isinstance(m, _BatchNorm) and m.training and m.track_running_stats]
    start = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone())
             for m in layers]
    sums = [(torch.zeros_like(m.running_mean), torch.zeros_like(m.running_var)) for m in layers]
    outputs = []
    for i, chunk in enumerate(x.chunk(groups)):
        if i:  # back to the running statistics before this step
            for m, (mean, var, count) in zip(layers, start):
                m.running_mean.copy_(mean)
                m.running_var.copy_(var)
                m.num_batches_tracked.copy_(count)
        for module in modules:
            chunk = module(chunk)
        outputs.append(chunk)
        for m, (mean, var) in zip(layers, sums):
            mean.add_(m.running_mean)
            var.add_(m.running_var)
    for m, (mean, var) in zip(layers, sums):
        m.running_mean.copy_(mean / groups)
        m.running_var.copy_(var / groups)
    return torch.cat(outputs)


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
        shuffle_bn: How the key encoder's BatchNorm avoids seeing exactly the query batch
            (MoCo paper, sec. 3.3). 'auto': across processes when several run (lightly's
            shuffle), else 'split'. 'split': shuffle the key batch, normalise it in `bn_splits`
            groups, unshuffle (each process on its own batch). 'off': no shuffle, BN over the
            key batch itself.
        bn_splits: Groups of 'split' (2: the processes of the paper's Tiny-ImageNet setting);
            must divide the batch of each process.
        data_preprocessor: mmengine data preprocessor config.
        init_cfg: mmengine init config.
    """

    first_pass_starts_with_first_view = True  # embed_query(x_q) first (MixCo: x_q, its mixes)

    def __init__(self,
                 backbone: Optional[dict] = None,
                 feature_dim: int = 128,
                 queue_size: int = 65536,
                 key_momentum: float = 0.999,
                 temperature: float = 0.2,
                 head_batch_norm: bool = False,
                 shuffle_bn: str = 'auto',
                 bn_splits: int = 2,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(backbone, data_preprocessor, init_cfg)
        if feature_dim < 1:
            raise ValueError(f'model.feature_dim must be >= 1, got {feature_dim}')
        if queue_size < 1:
            raise ValueError(f'model.queue_size must be >= 1, got {queue_size}')
        if not 0 <= key_momentum < 1:
            raise ValueError(f'model.key_momentum must be in [0, 1), got {key_momentum}')
        if temperature <= 0:
            raise ValueError(f'model.temperature must be > 0, got {temperature}')
        if shuffle_bn not in SHUFFLE_BN_MODES:
            raise ValueError(f'model.shuffle_bn {shuffle_bn!r} not in {SHUFFLE_BN_MODES}')
        if isinstance(bn_splits, bool) or not isinstance(bn_splits, int) or bn_splits < 1:
            raise ValueError(f'model.bn_splits must be an integer >= 1, got {bn_splits!r}')
        dim = self.backbone.feature_dim
        self.projection_head = MoCoProjectionHead(dim, dim, feature_dim, batch_norm=head_batch_norm)
        self.backbone_momentum = copy.deepcopy(self.backbone)
        self.projection_head_momentum = copy.deepcopy(self.projection_head)
        for param in self.momentum_parameters():
            param.requires_grad = False
        self.key_momentum = key_momentum
        self.temperature = temperature
        self.shuffle_bn = shuffle_bn
        self.bn_splits = bn_splits
        self.register_buffer('queue', F.normalize(torch.randn(queue_size, feature_dim), dim=1))
        self.register_buffer('queue_ptr', torch.zeros((), dtype=torch.long))

    def momentum_parameters(self) -> List[nn.Parameter]:
        """Parameters of the key encoder (never trained by the optimizer)."""
        return [*self.backbone_momentum.parameters(), *self.projection_head_momentum.parameters()]

    def embed_query(self, x: Tensor) -> Tensor:
        """Normalised query projections (N, D), float32 (also under autocast), with gradient."""
        return F.normalize(at_least_float32(self.projection_head(self.backbone(x))), dim=1)

    def key_shuffle(self, world_size: Optional[int] = None) -> str:
        """'across' (processes), 'split' (groups of one process's batch) or 'off', for a run of
        `world_size` processes (default: this one's)."""
        world_size = get_world_size() if world_size is None else world_size
        if self.shuffle_bn == 'auto':
            return 'across' if world_size > 1 else 'split'
        return self.shuffle_bn

    def key_batch_norm(self, world_size: Optional[int] = None) -> str:
        """The key encoder's BatchNorm regime as a results record states it."""
        world_size = get_world_size() if world_size is None else world_size
        mode = self.key_shuffle(world_size)
        if mode == 'across':
            return f'shuffle across {world_size} processes'
        if mode == 'split':
            where = 'one process' if world_size == 1 else f'on each of {world_size} processes'
            return f'split into {self.bn_splits} groups ({where})'
        return 'none'

    @torch.no_grad()
    def embed_keys(self, x: Tensor) -> Tensor:
        """Momentum-update the key encoder, then normalised float32 keys (N, D) with shuffle-BN."""
        update_momentum(self.backbone, self.backbone_momentum, self.key_momentum)
        update_momentum(self.projection_head, self.projection_head_momentum, self.key_momentum)
        mode = self.key_shuffle()
        if mode == 'across':  # BN statistics of a key come from other processes' samples
            x, shuffle = batch_shuffle(x, distributed=True)
            k = batch_unshuffle(self.projection_head_momentum(self.backbone_momentum(x)),
                                shuffle, distributed=True)
        elif mode == 'split' and self.backbone_momentum.training:
            # One process as bn_splits processes would see it: a random permutation, BN
            # statistics per group of the permuted batch, keys back in the batch's order.
            # In eval mode BN uses running statistics, and no permutation is drawn.
            x, shuffle = batch_shuffle(x)
            encoder = (self.backbone_momentum, self.projection_head_momentum)
            k = batch_unshuffle(forward_in_groups(encoder, x, self.bn_splits), shuffle)
        else:
            k = self.projection_head_momentum(self.backbone_momentum(x))  # (N, D)
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
        # One snapshot, read before this step's keys enter. A product, not clone(): torch.compile
        # (2.14) drops the clone of a buffer that the step then writes in place
        # (pytorch/pytorch#198031), and the backward would see this step's keys in the queue.
        queue = self.queue.detach() * 1
        losses, keys = self.contrast(x_q, x_k, queue)
        self.enqueue(keys)
        return losses
