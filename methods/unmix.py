"""Un-Mix on MoCo-v2: the batch mixed with its own reverse, global and region-level in turn.

Shen et al., "Un-Mix: Rethinking Image Mixtures for Unsupervised Visual Representation
Learning", AAAI 2022 (arXiv 2003.05438); the authors' MoCo code is github.com/szq0214/Un-Mix
(UnMix_MoCo/for_ImageNet). Per step with local batch B and one lam ~ Beta(1, 1):
* global mixture: x_mix = lam * x_q + (1 - lam) * x_q.flip(0);
* region-level mixture (CutMix): x_q with a random box pasted from x_q.flip(0); lam becomes
  the share of x_q's own pixels, 1 - box area / image area.
Loss = InfoNCE(q, k) + lam * InfoNCE(q_mix, k) + (1 - lam) * InfoNCE(q_mix, k.flip(0)), all
over the same queue snapshot and temperature.
"""
import math
from typing import Dict, Optional, Tuple

import torch
from mmengine.registry import MODELS
from torch import Tensor

from .mixco import sample_lambda
from .moco import MoCo, info_nce

SCHEDULES = ('alternate', 'random')
Box = Tuple[int, int, int, int]


def unmix_global(x: Tensor, lam: Tensor) -> Tensor:
    """Global mixture with the reversed batch.

    Args:
        x: Batch (B, ...).
        lam: Mixing ratio, a scalar tensor.

    Returns:
        Shape (B, ...): row i = lam * x[i] + (1 - lam) * x[B - 1 - i].
    """
    lam = lam.to(x.dtype)
    return lam * x + (1 - lam) * x.flip(0)


def cutmix_box(height: int, width: int, lam: float, cy: int, cx: int) -> Box:
    """The CutMix box of the authors' `rand_bbox`: side sqrt(1 - lam) of the image, centred at
    (cy, cx), clipped to the image.

    Returns:
        (y1, y2, x1, x2): rows y1:y2 and columns x1:x2.
    """
    ratio = math.sqrt(1.0 - lam)
    cut_h, cut_w = int(height * ratio), int(width * ratio)
    y1, y2 = min(max(cy - cut_h // 2, 0), height), min(max(cy + cut_h // 2, 0), height)
    x1, x2 = min(max(cx - cut_w // 2, 0), width), min(max(cx + cut_w // 2, 0), width)
    return y1, y2, x1, x2


def unmix_region(x: Tensor, box: Box) -> Tuple[Tensor, float]:
    """Region-level mixture: paste the box of the reversed batch into each image.

    Args:
        x: Batch (B, C, H, W).
        box: (y1, y2, x1, x2) as from `cutmix_box`.

    Returns:
        (x_mix (B, C, H, W), lam = 1 - box area / (H * W): the share of each image's own pixels).
    """
    y1, y2, x1, x2 = box
    mixed = x.clone()
    mixed[:, :, y1:y2, x1:x2] = x.flip(0)[:, :, y1:y2, x1:x2]
    return mixed, 1.0 - (y2 - y1) * (x2 - x1) / (x.shape[-2] * x.shape[-1])


def unmix_loss(q_mix: Tensor, k: Tensor, queue: Tensor, lam: Tensor,
               temperature: float) -> Tuple[Tensor, Tensor]:
    """The two mixture terms of Un-Mix, already weighted.

    Args:
        q_mix: Queries of the mixed images (B, D), L2-normalised.
        k: Keys of the unmixed images (B, D), L2-normalised, no gradient.
        queue: Negatives (K, D).
        lam: Share of each image's own content, a scalar tensor.
        temperature: tau.

    Returns:
        (lam * InfoNCE(q_mix, k), (1 - lam) * InfoNCE(q_mix, k.flip(0))): row i of the second
        term has the key of image B - 1 - i, the other image in mix i, as its positive.
    """
    loss_own, _ = info_nce(q_mix, k, queue, temperature)
    loss_flip, _ = info_nce(q_mix, k.flip(0), queue, temperature)
    lam = lam.to(loss_own.dtype)
    return lam * loss_own, (1 - lam) * loss_flip


@MODELS.register_module()
class UnMixMoCo(MoCo):
    """MoCo-v2 with Un-Mix; overrides only the loss computation of `MoCo`.

    Args:
        mix_alpha: alpha of Beta(alpha, alpha) for lam (1.0 in the paper and code).
        mix_schedule: 'alternate': global mixture on even steps, region-level on odd ones,
            from a step counter that checkpoints carry; 'random': a coin with
            P(global) = mix_global_prob each step, as the authors' code draws it.
        mix_global_prob: P(global) for mix_schedule='random' (0.5 in the authors' ImageNet
            MoCo script and CIFAR code).
        **kwargs: Arguments of `MoCo` (the same tau serves all three terms, as in the code).
    """

    def __init__(self,
                 mix_alpha: float = 1.0,
                 mix_schedule: str = 'alternate',
                 mix_global_prob: float = 0.5,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if mix_alpha <= 0:
            raise ValueError(f'model.mix_alpha must be > 0, got {mix_alpha}')
        if mix_schedule not in SCHEDULES:
            raise ValueError(f'model.mix_schedule {mix_schedule!r} not in {SCHEDULES}')
        if not 0 <= mix_global_prob <= 1:
            raise ValueError(f'model.mix_global_prob must be in [0, 1], got {mix_global_prob}')
        self.mix_alpha = mix_alpha
        self.mix_schedule = mix_schedule
        self.mix_global_prob = mix_global_prob
        # Steps taken, in the state dict so a resumed run continues the alternation; the host
        # keeps its own count, read from the buffer once after building or loading a state.
        self.register_buffer('mix_step', torch.zeros((), dtype=torch.long))
        self._host_step: Optional[int] = None

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        # A loaded state brings its own step counter (torch's loader and mmengine's call this).
        self._host_step = None
        super()._load_from_state_dict(*args, **kwargs)

    def use_global(self, device: torch.device) -> bool:
        """Whether this step mixes globally (True) or by region (False)."""
        # NOTE: the authors' code flips a coin each step (mix_schedule='random'); the default
        # alternates deterministically, the same 1:1 share without the variance.
        if self.mix_schedule == 'alternate':
            if self._host_step is None:  # read once after building or loading, then counted
                self._host_step = int(self.mix_step)
            return self._host_step % 2 == 0
        return bool(torch.rand(()) < self.mix_global_prob)  # CPU generator: nothing to read back

    def sample_mix(self, x: Tensor, use_global: bool) -> Tuple[Tensor, Optional[Box]]:
        """Draw lam (scalar tensor on x's device) and, for a region-level step, the box."""
        # NOTE: the authors draw lam and the box centre with numpy's RNG; here torch's global
        # CPU generator, so checkpointed RNG states make resume bit-identical, and the box is
        # computed on the host without reading anything back from the device.
        lam = sample_lambda(1, torch.device('cpu'), 'beta', self.mix_alpha, 'batch')[0]  # ()
        if use_global:
            return lam.to(x.device, non_blocking=True), None
        centre = [int(torch.randint(x.shape[-2], ())), int(torch.randint(x.shape[-1], ()))]
        return (lam.to(x.device, non_blocking=True),
                cutmix_box(x.shape[-2], x.shape[-1], float(lam), *centre))

    def contrast(self, x_q: Tensor, x_k: Tensor, queue: Tensor) -> Tuple[Dict[str, Tensor], Tensor]:
        """Instance loss on (q, k), the two mixture terms on (q_mix, k, k.flip(0))."""
        use_global = self.use_global(x_q.device)
        lam, box = self.sample_mix(x_q, use_global)
        if box is None:
            x_mix = unmix_global(x_q, lam)
        else:
            x_mix, share = unmix_region(x_q, box)
            lam = torch.tensor(share, dtype=x_q.dtype).to(x_q.device, non_blocking=True)
        # The authors embed x_q and x_mix in separate forward passes (BN over B each).
        q, q_mix = self.embed_query(x_q), self.embed_query(x_mix)  # (B, D), (B, D)
        k = self.embed_keys(x_k)  # (B, D)
        loss_inst, acc = info_nce(q, k, queue, self.temperature)
        loss_mix, loss_mix_flip = unmix_loss(q_mix, k, queue, lam, self.temperature)
        with torch.no_grad():
            self.mix_step += 1
        if self._host_step is not None:
            self._host_step += 1
        flag = torch.tensor(float(use_global)).to(lam.device, non_blocking=True)
        return dict(loss_inst=loss_inst, loss_mix=loss_mix, loss_mix_flip=loss_mix_flip,
                    acc_inst=acc, lam_mean=lam.detach().float(), mix_global=flag), k
