"""The random parameters of a contrastive view, drawn for a whole batch at once.

`view_spec` reads a view preset exactly as the PIL path builds it: the keyword defaults of
lightly's ``MoCoV2Transform`` / ``SimCLRTransform`` with the config's overrides (e.g. the
digits demo's ``min_scale=0.6``), and torchvision's ``ColorJitter`` for the jitter ranges.
`draw_view_params` then draws every image's parameters independently, from the distributions
the PIL path draws one image's from:

* crop: ``RandomResizedCrop.get_params`` (10 tries of area ~ U(scale) x image area and
  log-aspect ~ U(log ratio), sides rounded, first try that fits; else the central crop),
  the position uniform over the places where the crop fits;
* flips: Bernoulli(hf_prob), Bernoulli(vf_prob);
* colour jitter: applied with probability cj_prob; brightness, contrast and saturation
  factors ~ U(range), hue shift ~ U(-hue, hue), and the four in an order drawn uniformly
  from the 24 permutations, per image, as ``ColorJitter.get_params`` does per call;
* grey-scale: Bernoulli(random_gray_scale);
* blur: Bernoulli(gaussian_blur), sigma ~ U(sigmas) (lightly's ``GaussianBlur``).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

import torch
from lightly.transforms.utils import IMAGENET_NORMALIZE
from torch import Tensor
from torchvision import transforms as T

from benchmark.data.views import PRESETS, check_overrides

CROP_RATIO = (3 / 4, 4 / 3)  # RandomResizedCrop's default, which lightly keeps
CROP_TRIES = 10
JITTER_OPS = ('brightness', 'contrast', 'saturation', 'hue')
Range = Optional[Tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class ViewSpec:
    """Everything that defines one contrastive view; see `view_spec`."""
    input_size: int
    scale: Tuple[float, float]
    ratio: Tuple[float, float]
    hf_prob: float
    vf_prob: float
    cj_prob: float
    jitter: Tuple[Range, Range, Range, Range]  # brightness, contrast, saturation, hue; None = off
    gray_prob: float
    blur_prob: float
    sigmas: Tuple[float, float]
    mean: Optional[Tuple[float, float, float]]
    std: Optional[Tuple[float, float, float]]


def view_spec(view: Union[str, dict], input_size: int,
              normalize: Optional[Dict[str, List[float]]] = IMAGENET_NORMALIZE) -> ViewSpec:
    """The parameters of a contrastive preset as the PIL path would use them.

    Args:
        view: ``'mocov2'``, ``'simclr'`` or ``dict(name=..., **overrides)`` with the keyword
            arguments of the lightly transform, as ``benchmark.data.views.build_view`` takes.
        input_size: Side of the square output in pixels.
        normalize: Dict with ``'mean'`` and ``'std'``, or None to keep values in [0, 1].

    Raises:
        ValueError: One line: unknown preset or override, or a rotation (not supported here).
    """
    overrides = dict(view) if isinstance(view, dict) else dict(name=view)
    name = overrides.pop('name', None)
    if name not in PRESETS:
        raise ValueError(f"view {name!r} cannot be drawn on the device; valid: "
                         f"{', '.join(PRESETS)}")
    check_overrides(name, overrides)
    params = inspect.signature(PRESETS[name]).parameters
    args = {k: p.default for k, p in params.items()} | overrides
    if args['rr_prob'] > 0:
        raise ValueError(f"view {name!r}: rr_prob={args['rr_prob']} (random rotation) is not "
                         "drawn on the device; set rr_prob=0 or use the PIL path")
    strength = args['cj_strength']
    jitter = T.ColorJitter(brightness=strength * args['cj_bright'],
                           contrast=strength * args['cj_contrast'],
                           saturation=strength * args['cj_sat'], hue=strength * args['cj_hue'])
    ranges = tuple(None if r is None else (float(r[0]), float(r[1]))
                   for r in (jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue))
    return ViewSpec(
        input_size=int(input_size), scale=(float(args['min_scale']), 1.0), ratio=CROP_RATIO,
        hf_prob=float(args['hf_prob']), vf_prob=float(args['vf_prob']),
        cj_prob=float(args['cj_prob']), jitter=ranges, gray_prob=float(args['random_gray_scale']),
        blur_prob=float(args['gaussian_blur']), sigmas=tuple(map(float, args['sigmas'])),
        mean=tuple(normalize['mean']) if normalize else None,
        std=tuple(normalize['std']) if normalize else None)


class ViewParams(NamedTuple):
    """One view's parameters for a batch of B images (CPU tensors)."""
    box: Tensor  # (B, 4) int64: top, left, height, width of the crop
    hflip: Tensor  # (B,) bool
    vflip: Tensor  # (B,) bool
    jitter: Tensor  # (B,) bool: colour jitter applied
    factors: Tensor  # (B, 4) float64: brightness, contrast, saturation factors, hue shift
    order: Tensor  # (B, 4) int64: a permutation of 0..3 (indices into JITTER_OPS)
    gray: Tensor  # (B,) bool
    blur: Tensor  # (B,) bool
    sigma: Tensor  # (B,) float64, meaningful where blur


def crop_boxes(n: int, height: int, width: int, scale: Tuple[float, float],
               ratio: Tuple[float, float], generator: torch.Generator) -> Tensor:
    """``RandomResizedCrop.get_params`` for ``n`` images of one size, all tries in one draw.

    Returns:
        (n, 4) int64: top, left, height, width.
    """
    area = torch.empty(n, CROP_TRIES, dtype=torch.float64).uniform_(*scale, generator=generator)
    log_ratio = torch.empty(n, CROP_TRIES, dtype=torch.float64).uniform_(
        math.log(ratio[0]), math.log(ratio[1]), generator=generator)
    place = torch.rand(n, 2, dtype=torch.float64, generator=generator)
    target, aspect = area * height * width, torch.exp(log_ratio)
    w = torch.round(torch.sqrt(target * aspect))  # round half to even, as Python's round
    h = torch.round(torch.sqrt(target / aspect))
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)  # (n, tries)
    first = fits.long().argmax(1, keepdim=True)  # the first try that fits
    h, w = h.gather(1, first)[:, 0], w.gather(1, first)[:, 0]
    # The central crop where no try fits (the whole image when its aspect is within ratio).
    in_ratio = width / height
    fall_w = width if in_ratio <= max(ratio) else round(height * max(ratio))
    fall_h = height if in_ratio >= min(ratio) else round(width / min(ratio))
    found = fits.any(1)
    h = torch.where(found, h, torch.full_like(h, fall_h)).long()
    w = torch.where(found, w, torch.full_like(w, fall_w)).long()
    top = torch.where(found, torch.floor(place[:, 0] * (height - h + 1)).long(), (height - h) // 2)
    left = torch.where(found, torch.floor(place[:, 1] * (width - w + 1)).long(), (width - w) // 2)
    return torch.stack((top, left, h, w), 1)


def draw_view_params(spec: ViewSpec, n: int, height: int, width: int,
                     generator: torch.Generator) -> ViewParams:
    """Independent parameters of one view for ``n`` images of size (height, width).

    Every quantity is drawn for every image whether or not it is used, so the generator
    advances by the same amount for any spec.
    """
    box = crop_boxes(n, height, width, spec.scale, spec.ratio, generator)
    coins = torch.rand(n, 5, dtype=torch.float64, generator=generator)
    uniform = torch.rand(n, 4, dtype=torch.float64, generator=generator)
    ranges = [r if r is not None else ((0.0, 0.0) if op == 'hue' else (1.0, 1.0))
              for op, r in zip(JITTER_OPS, spec.jitter)]
    low = torch.tensor([r[0] for r in ranges], dtype=torch.float64)
    high = torch.tensor([r[1] for r in ranges], dtype=torch.float64)
    order = torch.rand(n, 4, generator=generator).argsort(1)  # a uniform random permutation
    sigma = torch.empty(n, dtype=torch.float64).uniform_(*spec.sigmas, generator=generator)
    return ViewParams(box=box, hflip=coins[:, 0] < spec.hf_prob, vflip=coins[:, 1] < spec.vf_prob,
                      jitter=coins[:, 2] < spec.cj_prob, factors=low + (high - low) * uniform,
                      order=order, gray=coins[:, 3] < spec.gray_prob,
                      blur=coins[:, 4] < spec.blur_prob, sigma=sigma)
