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
from typing import Dict, Tuple

import torch
from mmengine.registry import MODELS
from torch import Tensor

from .mixco import sample_lambda
from .moco import MoCo, info_nce

SCHEDULES = ('alternate', 'random')


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


def cutmix_box(height: int, width: int, lam: Tensor, cy: Tensor, cx: Tensor) -> Tensor:
    """The CutMix box of the authors' `rand_bbox`: side sqrt(1 - lam) of the image, centred at
    (cy, cx), clipped to the image; computed on lam's device (float64, as the authors' Python
    floats), so that nothing is read back to the host.

    Returns:
        (y1, y2, x1, x2) as a tensor of 4 integers: rows y1:y2 and columns x1:x2.
    """
    ratio = torch.sqrt(1.0 - lam.double())
    half_h = (height * ratio).long() // 2  # int(H * ratio) // 2
    half_w = (width * ratio).long() // 2
    return torch.stack([(cy - half_h).clamp(0, height), (cy + half_h).clamp(0, height),
                        (cx - half_w).clamp(0, width), (cx + half_w).clamp(0, width)])


def unmix_region(x: Tensor, box) -> Tuple[Tensor, Tensor]:
    """Region-level mixture: paste the box of the reversed batch into each image.

    Args:
        x: Batch (B, C, H, W).
        box: (y1, y2, x1, x2) as from `cutmix_box` (a tensor or 4 integers).

    Returns:
        (x_mix (B, C, H, W), lam = 1 - box area / (H * W), the share of each image's own pixels,
        a scalar tensor of x's dtype).
    """
    y1, y2, x1, x2 = torch.as_tensor(box, device=x.device)
    rows = torch.arange(x.shape[-2], device=x.device)
    cols = torch.arange(x.shape[-1], device=x.device)
    inside = ((rows >= y1) & (rows < y2))[:, None] & ((cols >= x1) & (cols < x2))[None]  # (H, W)
    area = ((y2 - y1) * (x2 - x1)).double()
    share = 1.0 - area / (x.shape[-2] * x.shape[-1])
    return torch.where(inside, x.flip(0), x), share.to(x.dtype)


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
        # Steps taken, in the state dict so a resumed run continues the alternation; a device
        # buffer that the step reads and counts on the device.
        self.register_buffer('mix_step', torch.zeros((), dtype=torch.long))

    def use_global(self, device: torch.device) -> Tensor:
        """Whether this step mixes globally (True) or by region (False): a boolean scalar on
        `device`, so that the step never waits for the host to decide."""
        # NOTE: the authors' code flips a coin each step (mix_schedule='random'); the default
        # alternates deterministically, the same 1:1 share without the variance.
        if self.mix_schedule == 'alternate':
            return self.mix_step % 2 == 0
        return torch.rand((), device=device) < self.mix_global_prob

    def sample_mix(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        """Draw lam (a scalar) and a region-level box (4 integers) on x's device."""
        # NOTE: the authors draw lam and the box centre with numpy's RNG; here the generator of
        # x's device (which checkpoints carry, so resume is bit-identical). Every step draws
        # both, whichever mixture it uses, so that each step draws the same numbers.
        lam = sample_lambda(1, x.device, 'beta', self.mix_alpha, 'batch')[0]  # ()
        cy = torch.randint(x.shape[-2], (), device=x.device)
        cx = torch.randint(x.shape[-1], (), device=x.device)
        return lam, cutmix_box(x.shape[-2], x.shape[-1], lam, cy, cx)

    def contrast(self, x_q: Tensor, x_k: Tensor, queue: Tensor) -> Tuple[Dict[str, Tensor], Tensor]:
        """Instance loss on (q, k), the two mixture terms on (q_mix, k, k.flip(0))."""
        use_global = self.use_global(x_q.device)
        lam, box = self.sample_mix(x_q)
        x_region, share = unmix_region(x_q, box)
        # Both mixtures are formed and one is kept (on the device: no branch on a device value).
        x_mix = torch.where(use_global, unmix_global(x_q, lam), x_region)
        lam = torch.where(use_global, lam.to(share.dtype), share)
        # The authors embed x_q and x_mix in separate forward passes (BN over B each).
        q, q_mix = self.embed_query(x_q), self.embed_query(x_mix)  # (B, D), (B, D)
        k = self.embed_keys(x_k)  # (B, D)
        loss_inst, acc = info_nce(q, k, queue, self.temperature)
        loss_mix, loss_mix_flip = unmix_loss(q_mix, k, queue, lam, self.temperature)
        with torch.no_grad():
            self.mix_step += 1
        return dict(loss_inst=loss_inst, loss_mix=loss_mix, loss_mix_flip=loss_mix_flip,
                    acc_inst=acc, lam_mean=lam.detach().float(), mix_global=use_global.float()), k
