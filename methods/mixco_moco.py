"""MixCo on MoCo-v2 (paper eq. 3 and Algorithm 1): MoCo plus semi-positive mixed queries."""
from typing import Dict, Tuple

import torch
from mmengine.registry import MODELS
from torch import Tensor

from .mixco import MixCoLoss, Mixer
from .moco import MoCo, info_nce


@MODELS.register_module()
class MixCoMoCo(MoCo):
    """MoCo-v2 with the MixCo loss; overrides only the loss computation of `MoCo`.

    Args:
        mix_temperature: tau_mix (paper: 0.05; 1.0 on ImageNet).
        mix_weight: beta, the weight of L_mix in the total loss (paper: 1).
        mix_lambda: 'uniform' (paper) or 'beta'.
        mix_alpha: Beta concentration for mix_lambda='beta'.
        mix_lambda_scope: 'pair' (paper) or 'batch'.
        mix_pairing: 'halves' (paper) or 'permutation'.
        mix_joint_forward: One forward of cat(x_q, x_mix) so BN sees 1.5 B samples, as the
            authors do (True), or a separate forward for the mixed images (False).
        mix_in_batch_negatives: All 2M local keys in the mixed softmax (paper) or only each
            row's two semi-positives plus the queue.
        mix_target: 'soft' (paper) or 'weighted_hard' (i-Mix style, same value).
        **kwargs: Arguments of `MoCo`.
    """

    def __init__(self,
                 mix_temperature: float = 0.05,
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
        if not mix_temperature > 0:  # MixCoLoss refuses it too, naming its own argument
            raise ValueError(f'model.mix_temperature must be > 0, got {mix_temperature}')
        self.mixer = Mixer(mix_lambda, mix_alpha, mix_lambda_scope, mix_pairing)
        self.mix_loss = MixCoLoss(mix_temperature, mix_in_batch_negatives, mix_target)
        self.mix_weight = mix_weight
        self.mix_joint_forward = mix_joint_forward

    def contrast(self, x_q: Tensor, x_k: Tensor, queue: Tensor) -> Tuple[Dict[str, Tensor], Tensor]:
        """Instance loss on (q, k) and mix loss on (q_mix, k); the same queue snapshot for both."""
        b = x_q.shape[0]
        x_mix, lam, order = self.mixer(x_q)  # (B/2, C, H, W), (B/2,)
        if self.mix_joint_forward:
            q, q_mix = self.embed_query(torch.cat([x_q, x_mix])).split([b, b // 2])
        else:
            q, q_mix = self.embed_query(x_q), self.embed_query(x_mix)  # (B, D), (B/2, D)
        k = self.embed_keys(x_k)  # (B, D)
        loss_inst, acc = info_nce(q, k, queue, self.temperature)
        keys_mix = k if order is None else k[order]  # semi-positives in the mixed order
        loss_mix = self.mix_loss(q_mix, keys_mix, lam, queue)
        return dict(loss_inst=loss_inst, loss_mix=self.mix_weight * loss_mix,
                    acc_inst=acc, lam_mean=lam.mean()), k
