"""MixCo on MoCo-v2 (paper eq. 3 and Algorithm 1): MoCo plus semi-positive mixed queries."""
from typing import Dict, Tuple

import torch
from mmengine.registry import MODELS
from torch import Tensor

from .mixco import MixCoMixin
from .moco import MoCo, info_nce


@MODELS.register_module()
class MixCoMoCo(MixCoMixin, MoCo):
    """MoCo-v2 with the MixCo loss; overrides only the loss computation of `MoCo`.

    Takes the arguments of `MixCoMixin`, with the paper's defaults (``mix_joint_forward=True``:
    one forward of cat(x_q, x_mix), so BN sees 1.5 B samples, as the authors do; False: a
    separate forward for the mixed images), and those of `MoCo`.
    """

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
