"""MoCHi on MoCo-v2: synthetic hard negatives mixed from each query's hardest queue entries.

Kalantidis et al., "Hard Negative Mixing for Contrastive Learning", NeurIPS 2020, sec. 4.
Per query q (no official code was released; this follows the paper's text):
1. Q~ = its N hardest negatives: the queue entries with the highest q . n.
2. s synthetic negatives h = normalise(alpha n_i + (1 - alpha) n_j), n_i, n_j drawn from Q~
   (independently, so now and then i = j), alpha ~ U(0, 1) (sec. 4.1, "mixing the hardest
   negatives": alpha in (0, 1), randomly chosen; uniform is this module's reading).
3. s' harder ones h' = normalise(beta q + (1 - beta) n_j), n_j from Q~, beta ~ U(0, 0.5), so the
   query never contributes more than the negative (sec. 4.2, "even harder negatives").
4. They join that query's negatives in InfoNCE, as constants (no gradient flows into them);
   they never enter the queue.
5. None for the first 10 epochs (sec. 5: 10 on ImageNet-100, 15 on ImageNet-1K).
Each default's source: tests/methods/test_mochi_sources.py.
"""
from typing import Dict, Tuple

import torch
import torch.nn.functional as F
from mmengine.logging import MessageHub
from mmengine.registry import MODELS
from torch import Tensor

from .moco import MoCo, info_nce

QUERY_SHARE_MAX = 0.5  # beta ~ U(0, 0.5) in sec. 4.2


def hardest_negatives(q: Tensor, queue: Tensor, num: int) -> Tensor:
    """The `num` queue entries most similar to each query, most similar first.

    Args:
        q: Queries (B, D), L2-normalised.
        queue: Negatives (K, D), K >= num.
        num: N.

    Returns:
        Shape (B, N, D), no gradient.
    """
    idx = (q.detach() @ queue.t()).topk(num, dim=1).indices  # (B, N), sorted descending
    return queue[idx].detach()  # (B, N, D)


def synthesize_negatives(q: Tensor, hard: Tensor, pair_idx: Tensor, alpha: Tensor,
                         query_idx: Tensor, beta: Tensor) -> Tensor:
    """Mix hard negatives with each other (s) and with the query (s'), then L2-normalise.

    Args:
        q: Queries (B, D); used detached.
        hard: Each query's hardest negatives (B, N, D).
        pair_idx: (B, s, 2) indices into N: the two negatives of each synthetic point.
        alpha: (B, s) weight of the first of the pair.
        query_idx: (B, s') index into N of the negative mixed with the query.
        beta: (B, s') weight of the query, in [0, 0.5).

    Returns:
        Shape (B, s + s', D), unit rows, no gradient.
    """
    rows = torch.arange(hard.shape[0], device=hard.device)[:, None]  # (B, 1)
    first, second = hard[rows, pair_idx[..., 0]], hard[rows, pair_idx[..., 1]]  # (B, s, D) each
    alpha = alpha.to(hard.dtype)[..., None]  # (B, s, 1)
    mixed = alpha * first + (1 - alpha) * second  # (B, s, D)
    beta = beta.to(hard.dtype)[..., None]  # (B, s', 1)
    with_query = beta * q.detach()[:, None] + (1 - beta) * hard[rows, query_idx]  # (B, s', D)
    return F.normalize(torch.cat([mixed, with_query], 1), dim=2).detach()  # (B, s + s', D)


def mochi_info_nce(q: Tensor, k: Tensor, queue: Tensor, synthetic: Tensor,
                   temperature: float) -> Tuple[Tensor, Tensor]:
    """InfoNCE with per-query extra negatives.

    Args:
        q: Queries (B, D), L2-normalised.
        k: Keys (B, D), L2-normalised, no gradient.
        queue: Shared negatives (K, D).
        synthetic: Per-query negatives (B, S, D).
        temperature: tau.

    Returns:
        (loss over the logits [q.k, q.queue, q.synthetic] / tau with the positive at column 0,
        top-1 accuracy of picking the positive among all 1 + K + S).
    """
    l_pos = (q * k).sum(1, keepdim=True)  # (B, 1)
    l_queue = q @ queue.t()  # (B, K)
    l_syn = torch.einsum('bd,bsd->bs', q, synthetic)  # (B, S)
    logits = torch.cat([l_pos, l_queue, l_syn], 1) / temperature  # (B, 1 + K + S)
    labels = torch.zeros(q.shape[0], dtype=torch.long, device=q.device)
    acc = (logits.detach().argmax(1) == 0).float().mean()
    return F.cross_entropy(logits, labels), acc


@MODELS.register_module()
class MoCHiMoCo(MoCo):
    """MoCo-v2 with MoCHi hard negative mixing; overrides only the loss computation of `MoCo`.

    Args:
        mix_hardest: N, hardest negatives per query (1024). Clamped to the queue size K when
            K is smaller (then every queue entry is among the "hardest").
        mix_synthetic: s, negatives mixed from pairs of hard negatives (1024).
        mix_query_synthetic: s', negatives mixed from the query and a hard negative (512).
        mix_warmup_epochs: Epochs of plain MoCo-v2 before mixing starts (10, the paper's
            ImageNet-100 value, sec. 5); the epoch is the one mmengine's runner publishes in its
            MessageHub (0 outside a runner).
        **kwargs: Arguments of `MoCo`.
    """

    def __init__(self,
                 mix_hardest: int = 1024,
                 mix_synthetic: int = 1024,
                 mix_query_synthetic: int = 512,
                 mix_warmup_epochs: int = 10,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        for name, value, low in [('mix_hardest', mix_hardest, 1),
                                 ('mix_synthetic', mix_synthetic, 0),
                                 ('mix_query_synthetic', mix_query_synthetic, 0),
                                 ('mix_warmup_epochs', mix_warmup_epochs, 0)]:
            if value < low:
                raise ValueError(f'model.{name} must be >= {low}, got {value}')
        # NOTE: the mixing follows the paper (sec. 4.1-4.2: pairs of the N < K hardest with
        # alpha in (0, 1); the detached query with one of them, beta in (0, 0.5); nothing
        # synthetic enqueued), as public reimplementations do, and so does the warm-up (sec. 5:
        # 10 epochs on ImageNet-100, 15 on ImageNet-1K). The sizes are not a row of the paper:
        # it trains ResNet-50 on ImageNet-100 and ImageNet-1K (no Tiny-ImageNet) over a grid of
        # (N, s, s') (Tables 1-2); (1024, 1024, 512) is this repository's choice for the MixCo
        # Tiny-ImageNet setting (K = 65536, the paper's ImageNet-1K K). Quote a paper number only
        # with a config that sets its row. tests/methods/test_mochi_sources.py holds the sources.
        self.mix_hardest = mix_hardest
        self.mix_synthetic = mix_synthetic
        self.mix_query_synthetic = mix_query_synthetic
        self.mix_warmup_epochs = mix_warmup_epochs
        self.mix_active = self.mixing()

    def mixing(self) -> bool:
        """Whether this step synthesises negatives (the warm-up is over)."""
        epoch = MessageHub.get_current_instance().get_info('epoch', 0)
        return epoch >= self.mix_warmup_epochs and self.mix_synthetic + self.mix_query_synthetic > 0

    def before_step(self) -> None:
        """The warm-up's end, read from the runner's epoch on the host before the step (a
        traced step sees a Python bool, not mmengine's MessageHub and its lock)."""
        self.mix_active = self.mixing()

    def sample_synthesis(self, b: int, n: int, device: torch.device) -> Tuple[Tensor, ...]:
        """Draw (pair_idx (B, s, 2), alpha (B, s), query_idx (B, s'), beta (B, s')) from torch's
        global RNG on `device`; indices are into the N hardest."""
        s, s_query = self.mix_synthetic, self.mix_query_synthetic
        pair_idx = torch.randint(n, (b, s, 2), device=device)
        alpha = torch.rand(b, s, device=device)
        query_idx = torch.randint(n, (b, s_query), device=device)
        beta = QUERY_SHARE_MAX * torch.rand(b, s_query, device=device)
        return pair_idx, alpha, query_idx, beta

    def contrast(self, x_q: Tensor, x_k: Tensor, queue: Tensor) -> Tuple[Dict[str, Tensor], Tensor]:
        """InfoNCE whose negatives are the queue snapshot plus each query's synthetic ones."""
        q = self.embed_query(x_q)  # (B, D)
        k = self.embed_keys(x_k)  # (B, D)
        if not self.mix_active:
            loss, acc = info_nce(q, k, queue, self.temperature)
            return dict(loss_inst=loss, acc_inst=acc, mix_active=q.new_zeros(())), k
        n = min(self.mix_hardest, queue.shape[0])
        hard = hardest_negatives(q, queue, n)  # (B, N, D)
        synthetic = synthesize_negatives(q, hard, *self.sample_synthesis(q.shape[0], n, q.device))
        loss, acc = mochi_info_nce(q, k, queue, synthetic, self.temperature)
        return dict(loss_inst=loss, acc_inst=acc, mix_active=q.new_ones(())), k
