"""Batched image operations of the contrastive views, one parameter set per image.

Every function takes a float batch ``x`` of shape (B, 3, H, W) with values in [0, 1] and
per-image parameters of shape (B,) on the batch's device; image ``b`` gets parameter ``b``.
Each one is the float counterpart of the PIL operation the CPU path
(``benchmark.data.views`` -> lightly -> torchvision on PIL images) applies:

* ``resize_matrices`` / ``resized_crop``: PIL's bilinear ``Image.resize`` of a crop (its
  triangle filter widened by the scale factor when shrinking, i.e. PIL's antialiasing,
  sampling the crop only), written as two batched matrix products.
* ``adjust_*`` and ``grayscale``: torchvision's ColorJitter and RandomGrayscale formulas
  (PIL's ImageEnhance blends with black, the mean grey level, the grey image; ITU-R 601
  luma 0.299 / 0.587 / 0.114 as PIL's ``convert('L')``).
* ``pil_box_radius`` / ``gaussian_blur``: PIL's ``ImageFilter.GaussianBlur(radius=sigma)``,
  which is not a sampled Gaussian but three passes per axis of an "extended box" whose
  radius comes from sigma (Gwosdek et al. 2011), edge pixels repeated at every pass.

NOTE: the PIL path rounds to uint8 after every step (and PIL's hue shift works on 8-bit
HSV); these stay in float32, so the two paths differ by rounding (a few 1/255 at most).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# ITU-R 601-2 luma, the weights of PIL's convert('L').
LUMA = (0.299, 0.587, 0.114)
BLUR_PASSES = 3  # PIL's ImagingGaussianBlur: three box passes per axis


def resize_matrices(start: Tensor, length: Tensor, in_size: int, out_size: int) -> Tensor:
    """Per-image matrices of PIL's bilinear resize of the interval [start, start + length).

    Args:
        start: First pixel of each crop along the axis, (B,), integer-valued.
        length: Pixels in each crop along the axis, (B,), >= 1.
        in_size: Pixels of the image along the axis.
        out_size: Pixels of the output along the axis.

    Returns:
        (B, out_size, in_size) float32: row ``o`` holds the weights of output pixel ``o``
        over the input pixels; zero outside the crop; each row sums to 1.
    """
    start, length = start.double()[:, None, None], length.double()[:, None, None]
    scale = length / out_size  # input pixels per output pixel
    support = scale.clamp(min=1.0)  # PIL widens the triangle when shrinking (antialias)
    out = torch.arange(out_size, dtype=torch.float64, device=start.device)[None, :, None]
    centre = start + (out + 0.5) * scale  # (B, out, 1), in pixel-edge coordinates
    pixel = torch.arange(in_size, dtype=torch.float64, device=start.device)[None, None, :]
    weight = (1 - ((pixel + 0.5 - centre) / support).abs()).clamp(min=0)  # (B, out, in)
    weight = weight * ((pixel >= start) & (pixel < start + length))
    return (weight / weight.sum(-1, keepdim=True)).float()


def resized_crop(x: Tensor, rows: Tensor, cols: Tensor) -> Tensor:
    """Apply per-image resize matrices: ``rows[b] @ x[b, c] @ cols[b].T``.

    Args:
        x: Images (B, C, H, W).
        rows: (B, S_h, H) from `resize_matrices` along the height (flip its rows to flip).
        cols: (B, S_w, W) along the width.

    Returns:
        (B, C, S_h, S_w).
    """
    return rows[:, None] @ x @ cols[:, None].transpose(-1, -2)


def _blend(x: Tensor, other: Tensor, factor: Tensor) -> Tensor:
    """``clamp(factor * x + (1 - factor) * other, 0, 1)``, factor (B,) per image."""
    factor = factor.view(-1, 1, 1, 1).to(x.dtype)
    return (x - other).mul_(factor).add_(other).clamp_(0, 1)


def grayscale(x: Tensor) -> Tensor:
    """Luma (B, 1, H, W) of RGB images (B, 3, H, W) with PIL's weights."""
    r, g, b = x.unbind(1)
    return (LUMA[0] * r + LUMA[1] * g + LUMA[2] * b).unsqueeze(1)


def adjust_brightness(x: Tensor, factor: Tensor) -> Tensor:
    """Blend with black: ``clamp(factor * x, 0, 1)``; factor (B,)."""
    return (x * factor.view(-1, 1, 1, 1).to(x.dtype)).clamp_(0, 1)


def adjust_contrast(x: Tensor, factor: Tensor) -> Tensor:
    """Blend with the image's mean grey level (one scalar per image); factor (B,)."""
    return _blend(x, grayscale(x).mean((1, 2, 3), keepdim=True), factor)


def adjust_saturation(x: Tensor, factor: Tensor) -> Tensor:
    """Blend with the grey image; factor (B,)."""
    return _blend(x, grayscale(x), factor)


def rgb_to_hsv(x: Tensor) -> Tensor:
    """RGB (B, 3, H, W) in [0, 1] to HSV with hue in [0, 1)."""
    r, g, b = x.unbind(1)
    value, argmax = x.max(1)
    chroma = value - x.min(1).values
    flat = chroma == 0
    saturation = torch.where(value > 0, chroma / value.clamp(min=1e-12), torch.zeros_like(value))
    # Hue sextant by the largest channel (ties resolved red, then green, as colorsys does).
    top = torch.where(argmax == 0, g - b, torch.where(argmax == 1, b - r, r - g))
    hue = (top / torch.where(flat, torch.ones_like(chroma), chroma) + 2.0 * argmax) % 6
    return torch.stack((hue.masked_fill_(flat, 0) / 6, saturation, value), 1)


def hsv_to_rgb(x: Tensor) -> Tensor:
    """HSV (B, 3, H, W), hue in [0, 1), to RGB."""
    hue, saturation, value = x.unbind(1)
    # Each channel n is v - v s max(0, min(k, 4 - k, 1)), k = (n + 6 h) mod 6, n = 5, 3, 1.
    channels = []
    for n in (5.0, 3.0, 1.0):
        k = (n + hue * 6) % 6
        channels.append(value - value * saturation * torch.minimum(k, 4 - k).clamp(0, 1))
    return torch.stack(channels, 1)


def adjust_hue(x: Tensor, shift: Tensor) -> Tensor:
    """Rotate the hue by ``shift`` turns (B,), in [-0.5, 0.5]."""
    hsv = rgb_to_hsv(x)
    hue = (hsv[:, 0] + shift.view(-1, 1, 1).to(x.dtype)) % 1.0
    return hsv_to_rgb(torch.stack((hue, hsv[:, 1], hsv[:, 2]), 1))


def pil_box_radius(sigma: Tensor) -> Tensor:
    """Radius of the extended box PIL passes three times for ``GaussianBlur(radius=sigma)``.

    Box variance sigma^2 / 3 per pass, so three passes have variance sigma^2 (Gwosdek et al.
    2011, eqs. 7, 11, 14; Pillow's ``ImagingGaussianBlur``). Shape as ``sigma``, float64.
    """
    var = sigma.double() ** 2 / BLUR_PASSES
    whole = torch.floor((torch.sqrt(12 * var + 1) - 1) / 2)  # integer part of the radius
    frac = (2 * whole + 1) * (whole * (whole + 1) - 3 * var) / (6 * (var - (whole + 1) ** 2))
    return whole + frac


def box_kernels(radius: Tensor) -> Tensor:
    """Extended-box weights (B, 2 L + 3), L = max integer part, for radii (B,).

    Image b: weight 1 / (2 r + 1) on the 2 l + 1 central taps, (r - l) / (2 r + 1) on the two
    next ones, zero beyond (l = floor(r)); each row sums to 1.
    """
    whole = torch.floor(radius)
    half = int(whole.max()) + 1
    offset = torch.arange(-half, half + 1, dtype=torch.float64, device=radius.device).abs()
    inner = (offset[None] <= whole[:, None]).double()
    edge = (offset[None] == whole[:, None] + 1) * (radius - whole)[:, None]
    return ((inner + edge) / (2 * radius + 1)[:, None]).float()


def gaussian_blur(x: Tensor, sigma: Tensor) -> Tensor:
    """PIL's Gaussian blur with its own sigma per image, as grouped separable convolutions.

    Args:
        x: Images (B, C, H, W).
        sigma: Standard deviations (B,), > 0.

    Returns:
        (B, C, H, W): three box passes along the width, then three along the height, each
        with edge pixels repeated (as PIL's box blur does at every pass).
    """
    b, c, h, w = x.shape
    kernel = box_kernels(pil_box_radius(sigma)).to(x.device)  # (B, K)
    pad = kernel.shape[1] // 2
    weight = kernel.repeat_interleave(c, 0)[:, None, None, :]  # (B C, 1, 1, K)
    y = x.reshape(1, b * c, h, w)
    for _ in range(BLUR_PASSES):
        y = F.conv2d(F.pad(y, (pad, pad, 0, 0), mode='replicate'), weight, groups=b * c)
    weight = weight.transpose(-1, -2)  # (B C, 1, K, 1)
    for _ in range(BLUR_PASSES):
        y = F.conv2d(F.pad(y, (0, 0, pad, pad), mode='replicate'), weight, groups=b * c)
    return y.reshape(b, c, h, w)
