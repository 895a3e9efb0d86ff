"""i-Mix on MoCo-v2: every query is a mix of two images and its virtual label is mixed too.

Lee et al., "i-Mix: A Domain-Agnostic Strategy for Contrastive Representation Learning",
ICLR 2021, sec. 3 (i-Mix for MoCo); the authors' code is github.com/kibok90/imix (builder.py).
Per step with local batch B: each augmented query x_q[i] is mixed with x_q[partner[i]]
(partner = a random permutation), lam_i ~ Beta(alpha, alpha); the mixed query is scored
against the B in-batch keys and the K queue entries (the code switches MoCo to its "mocon"
variant whenever i-Mix is on), with soft target lam_i on key i and 1 - lam_i on key partner[i].
There is no separate unmixed instance loss.
"""
from typing import Dict, Tuple

import torch
import torch.nn.functional as F
from mmengine.registry import MODELS
from torch import Tensor

from .mixco import LAMBDA_SCOPES, sample_lambda
from .moco import MoCo


def imix_inputs(x: Tensor, lam: Tensor, partner: Tensor) -> Tensor:
    """Mix every sample with its partner.

    Args:
        x: Batch (B, ...).
        lam: Mixing ratios (B,).
        partner: Indices (B,) into the batch, e.g. a permutation.

    Returns:
        Shape (B, ...): row i = lam[i] * x[i] + (1 - lam[i]) * x[partner[i]].
    """
    lam = lam.to(x.dtype).view(-1, *([1] * (x.dim() - 1)))  # (B, 1, ..., 1)
    return lam * x + (1 - lam) * x[partner]


def imix_loss(q_mix: Tensor, keys: Tensor, queue: Tensor, lam: Tensor, partner: Tensor,
              temperature: float) -> Tuple[Tensor, Tensor]:
    """i-Mix's MoCo loss: lam-weighted cross-entropy over [in-batch keys, queue].

    Args:
        q_mix: Mixed queries (B, D), L2-normalised.
        keys: Keys of the unmixed samples (B, D), L2-normalised, no gradient.
        queue: Negatives (K, D).
        lam: Mixing ratios (B,).
        partner: Indices (B,) of the second sample of each mix.
        temperature: tau.

    Returns:
        (loss: mean over rows of -lam_i log p_i(i) - (1 - lam_i) log p_i(partner_i), where p_i
        is the softmax of row i over the B + K columns; accuracy: share of rows whose arg-max is
        the key of the larger share).
    """
    logits = torch.cat([q_mix @ keys.t(), q_mix @ queue.t()], 1) / temperature  # (B, B + K)
    own = torch.arange(q_mix.shape[0], device=q_mix.device)  # (B,)
    lam = lam.to(logits.dtype)
    ce_own = F.cross_entropy(logits, own, reduction='none')  # (B,)
    ce_partner = F.cross_entropy(logits, partner, reduction='none')  # (B,)
    loss = (lam * ce_own + (1 - lam) * ce_partner).mean()
    major = torch.where(lam >= 0.5, own, partner)  # (B,)
    acc = (logits.detach().argmax(1) == major).float().mean()
    return loss, acc


@MODELS.register_module()
class IMixMoCo(MoCo):
    """MoCo-v2 with i-Mix; overrides only the loss computation of `MoCo`.

    Args:
        mix_alpha: alpha of Beta(alpha, alpha) (1.0: the code's default and its CIFAR and
            Speech Commands MoCo runs; its ImageNet runs use 0.2).
        mix_lambda_scope: 'pair' (one lambda per mixed sample, as the authors' `mixup` draws
            it) or 'batch' (one lambda shared by the batch).
        mix_lambda_fold: Replace lam by max(lam, 1 - lam), so each mixed query is dominated by
            its own image, as the authors' code does (True).
        **kwargs: Arguments of `MoCo` (temperature: tau = 0.2 in the authors' MoCo runs).
    """

    first_pass_starts_with_first_view = False  # only mixed queries pass the query encoder

    def __init__(self,
                 mix_alpha: float = 1.0,
                 mix_lambda_scope: str = 'pair',
                 mix_lambda_fold: bool = True,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if mix_alpha <= 0:
            raise ValueError(f'model.mix_alpha must be > 0, got {mix_alpha}')
        if mix_lambda_scope not in LAMBDA_SCOPES:
            raise ValueError(f'model.mix_lambda_scope {mix_lambda_scope!r} not in {LAMBDA_SCOPES}')
        self.mix_alpha = mix_alpha
        self.mix_lambda_scope = mix_lambda_scope
        self.mix_lambda_fold = mix_lambda_fold

    def sample_mix(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        """Draw (lam (B,), partner (B,)) from torch's global RNG on x's device."""
        # NOTE: one lambda per sample, folded to >= 0.5, is what the authors' `mixup` does
        # (share_lam=False); mix_lambda_scope='batch' gives the per-batch variant.
        b = x.shape[0]
        partner = torch.randperm(b, device=x.device)  # (B,)
        lam = sample_lambda(b, x.device, 'beta', self.mix_alpha, self.mix_lambda_scope)  # (B,)
        if self.mix_lambda_fold:
            lam = torch.maximum(lam, 1 - lam)
        return lam, partner

    def contrast(self, x_q: Tensor, x_k: Tensor, queue: Tensor) -> Tuple[Dict[str, Tensor], Tensor]:
        """The i-Mix loss of mixed queries against in-batch keys and the queue snapshot."""
        lam, partner = self.sample_mix(x_q)
        q_mix = self.embed_query(imix_inputs(x_q, lam, partner))  # (B, D)
        k = self.embed_keys(x_k)  # (B, D)
        # NOTE: the authors' code gathers the keys of all processes (their "mocon" variant);
        # here the in-batch keys are the local ones, as for MixCo. One process: identical.
        loss, acc = imix_loss(q_mix, k, queue, lam, partner, self.temperature)
        return dict(loss_mix=loss, acc_mix=acc, lam_mean=lam.mean()), k
