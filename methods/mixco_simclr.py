"""MixCo on SimCLR, with the semantics of the authors' SimCLR code (see DESIGN.md)."""
from typing import Dict

import torch
from mmengine.registry import MODELS
from torch import Tensor

from .mixco import MixCoLoss, Mixer
from .simclr import SimCLR, positive_accuracy


@MODELS.register_module()
class MixCoSimCLR(SimCLR):
    """SimCLR with the MixCo loss; overrides only the loss computation of `SimCLR`.

    Each view is mixed separately with its own lambda; the mixed projections of view a are
    scored against the other view's projections (M x B logits over local embeddings, no queue,
    gradients flow into those targets too) and each view's L_mix is halved.

    Args:
        mix_temperature: tau_mix (0.5 in the authors' SimCLR scripts).
        mix_weight: beta.
        mix_lambda, mix_alpha, mix_lambda_scope, mix_pairing, mix_in_batch_negatives,
        mix_target: As in `MixCoMoCo`.
        mix_joint_forward: One forward of cat(x_a, x_b, mix_a, mix_b) (True) or a separate
            forward for the mixed images (False).
        **kwargs: Arguments of `SimCLR`.
    """

    def __init__(self,
                 mix_temperature: float = 0.5,
                 mix_weight: float = 1.0,
                 mix_lambda: str = 'uniform',
                 mix_alpha: float = 1.0,
                 mix_lambda_scope: str = 'pair',
                 mix_pairing: str = 'halves',
                 mix_joint_forward: bool = True,
                 mix_in_batch_negatives: bool = True,
                 mix_target: str = 'soft',
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if mix_weight < 0:
            raise ValueError(f'model.mix_weight must be >= 0, got {mix_weight}')
        self.mixer = Mixer(mix_lambda, mix_alpha, mix_lambda_scope, mix_pairing)
        self.mix_loss = MixCoLoss(mix_temperature, mix_in_batch_negatives, mix_target)
        self.mix_weight = mix_weight
        self.mix_joint_forward = mix_joint_forward

    def contrast(self, x_a: Tensor, x_b: Tensor) -> Dict[str, Tensor]:
        """NT-Xent on (z_a, z_b) plus the two halved mix losses."""
        b = x_a.shape[0]
        mix_a, lam_a, order_a = self.mixer(x_a)  # (B/2, C, H, W), (B/2,)
        mix_b, lam_b, order_b = self.mixer(x_b)
        if self.mix_joint_forward:
            z_a, z_b, zm_a, zm_b = self.embed(torch.cat([x_a, x_b, mix_a, mix_b])).split(
                [b, b, b // 2, b // 2])
        else:
            z_a, z_b = self.embed(torch.cat([x_a, x_b])).chunk(2)  # (B, D) each
            zm_a, zm_b = self.embed(torch.cat([mix_a, mix_b])).chunk(2)  # (B/2, D) each
        keys_a = z_b if order_a is None else z_b[order_a]  # other view, in view a's mixed order
        keys_b = z_a if order_b is None else z_a[order_b]
        loss_mix = 0.5 * (self.mix_loss(zm_a, keys_a, lam_a) + self.mix_loss(zm_b, keys_b, lam_b))
        return dict(loss_inst=self.criterion(z_a, z_b), loss_mix=self.mix_weight * loss_mix,
                    acc_inst=positive_accuracy(z_a, z_b),
                    lam_mean=torch.cat([lam_a, lam_b]).mean())
