"""MixCo on SimCLR, with the semantics of the authors' SimCLR code (docs/design.md, "On SimCLR
(the authors' code)")."""
from typing import Dict

import torch
from mmengine.registry import MODELS
from torch import Tensor

from .mixco import MixCoLoss, Mixer
from .simclr import SimCLR, positive_accuracy


# Encoder passes over [x_a, x_b, mix_a, mix_b] by (joint_forward, mix_joint_forward).
PASSES = {(False, False): [[0], [1], [2], [3]],  # the authors: four passes, in this order
          (True, False): [[0, 1], [2, 3]],
          (False, True): [[0, 2], [1, 3]],
          (True, True): [[0, 1, 2, 3]]}


@MODELS.register_module()
class MixCoSimCLR(SimCLR):
    """SimCLR with the MixCo loss; overrides only the loss computation of `SimCLR`.

    As the authors' simclr/pretrain.py: each view is mixed separately with its own lambda per
    pair; the mixed projections of view a are scored against the other view's projections
    (M x B logits over local embeddings, no queue, gradients flow into those targets too) and
    each view's L_mix is halved. The mixed batches get their own encoder passes (after the
    views': a, b, mixed a, mixed b) unless `joint_forward` or `mix_joint_forward` say otherwise.

    Args:
        mix_temperature: tau_mix (0.5 in the authors' SimCLR scripts).
        mix_weight: beta.
        mix_lambda, mix_alpha, mix_lambda_scope, mix_pairing, mix_in_batch_negatives,
        mix_target: As in `MixCoMoCo`.
        mix_joint_forward: False (authors): the mixed batches are encoded in passes of their
            own. True: each mixed batch joins the pass of its view (cat(x_a, mix_a) and
            cat(x_b, mix_b)), or the single pass with `joint_forward`.
        **kwargs: Arguments of `SimCLR`. `joint_forward=True, mix_joint_forward=True` (one
            pass over cat(x_a, x_b, mix_a, mix_b)) was this class's former default;
            `joint_forward=True` alone gives two passes, (x_a, x_b) and (mix_a, mix_b).
    """

    def __init__(self,
                 mix_temperature: float = 0.5,
                 mix_weight: float = 1.0,
                 mix_lambda: str = 'uniform',
                 mix_alpha: float = 1.0,
                 mix_lambda_scope: str = 'pair',
                 mix_pairing: str = 'halves',
                 mix_joint_forward: bool = False,
                 mix_in_batch_negatives: bool = True,
                 mix_target: str = 'soft',
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if mix_weight < 0:
            raise ValueError(f'model.mix_weight must be >= 0, got {mix_weight}')
        if not mix_temperature > 0:  # MixCoLoss refuses it too, naming its own argument
            raise ValueError(f'model.mix_temperature must be > 0, got {mix_temperature}')
        self.mixer = Mixer(mix_lambda, mix_alpha, mix_lambda_scope, mix_pairing)
        self.mix_loss = MixCoLoss(mix_temperature, mix_in_batch_negatives, mix_target)
        self.mix_weight = mix_weight
        self.mix_joint_forward = mix_joint_forward

    def contrast(self, x_a: Tensor, x_b: Tensor) -> Dict[str, Tensor]:
        """NT-Xent on (z_a, z_b) plus the two halved mix losses."""
        mix_a, lam_a, order_a = self.mixer(x_a)  # (B/2, C, H, W), (B/2,)
        mix_b, lam_b, order_b = self.mixer(x_b)
        passes = PASSES[(self.joint_forward, self.mix_joint_forward)]
        z_a, z_b, zm_a, zm_b = self.embed_passes([x_a, x_b, mix_a, mix_b], passes)
        keys_a = z_b if order_a is None else z_b[order_a]  # other view, in view a's mixed order
        keys_b = z_a if order_b is None else z_a[order_b]
        loss_mix = 0.5 * (self.mix_loss(zm_a, keys_a, lam_a) + self.mix_loss(zm_b, keys_b, lam_b))
        return dict(loss_inst=self.criterion(z_a, z_b), loss_mix=self.mix_weight * loss_mix,
                    acc_inst=positive_accuracy(z_a, z_b),
                    lam_mean=torch.cat([lam_a, lam_b]).mean())
