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

Whole batches: every function computes every image of the batch with broadcast per-image
factors (``lerp``, ``where``), never a subset chosen on the host, so a call dispatches the same
operations for any batch size and never reads the device. `jitter` applies ColorJitter's four
steps in each image's own order that way; `gaussian_blur` takes its kernel width from the
largest sigma the view can draw (a number on the host), not from the drawn ones.
"""
from __future__ import annotations

import math
from typing import Tuple

import torch
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
    """``clamp(factor * x + (1 - factor) * other, 0, 1)``, factor (B,) or (B, 1, 1, 1) per
    image; a factor of 1 leaves ``x`` exactly as it is."""
    return torch.lerp(other, x, factor.to(x.dtype).view(-1, 1, 1, 1)).clamp_(0, 1)


def grayscale(x: Tensor) -> Tensor:
    """Luma (B, 1, H, W) of RGB images (B, 3, H, W) with PIL's weights."""
    r, g, b = x.unbind(1)
    return (LUMA[0] * r).add_(g, alpha=LUMA[1]).add_(b, alpha=LUMA[2]).unsqueeze(1)


def adjust_brightness(x: Tensor, factor: Tensor) -> Tensor:
    """Blend with black: ``clamp(factor * x, 0, 1)``; factor (B,)."""
    return (x * factor.view(-1, 1, 1, 1).to(x.dtype)).clamp_(0, 1)


def adjust_contrast(x: Tensor, factor: Tensor) -> Tensor:
    """Blend with the image's mean grey level (one scalar per image); factor (B,)."""
    return _blend(x, grayscale(x).mean((1, 2, 3), keepdim=True), factor)


def adjust_saturation(x: Tensor, factor: Tensor) -> Tensor:
    """Blend with the grey image; factor (B,)."""
    return _blend(x, grayscale(x), factor)


def rgb_to_hcv(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """RGB (B, 3, H, W) in [0, 1] to hue in [0, 1), chroma (value times HSV saturation) and
    value, each (B, H, W)."""
    r, g, b = x.unbind(1)
    value = torch.maximum(torch.maximum(r, g), b)
    chroma = value - torch.minimum(torch.minimum(r, g), b)
    flat = chroma == 0
    # Hue sextant by the largest channel (ties resolved red, then green, as colorsys does).
    red = r == value
    green = (g == value) & ~red
    top = torch.where(red, g - b, torch.where(green, b - r, r - g))
    base = torch.where(red, 0.0, torch.where(green, 2.0, 4.0))
    hue = (top / torch.where(flat, 1.0, chroma) + base) % 6
    return hue.masked_fill_(flat, 0) / 6, chroma, value


def hcv_to_rgb(hue: Tensor, chroma: Tensor, value: Tensor) -> Tensor:
    """Hue in [0, 1), chroma and value (B, H, W) to RGB (B, 3, H, W)."""
    # Each channel n is v - c max(0, min(k, 4 - k, 1)), k = (n + 6 h) mod 6, n = 5, 3, 1.
    channels = []
    for n in (5.0, 3.0, 1.0):
        k = (hue * 6 + n) % 6
        channels.append(value - chroma * torch.minimum(k, 4 - k).clamp_(0, 1))
    return torch.stack(channels, 1)


def adjust_hue(x: Tensor, shift: Tensor) -> Tensor:
    """Rotate the hue by ``shift`` turns (B,), in [-0.5, 0.5]: HSV's saturation and value
    stay, so its chroma does too."""
    hue, chroma, value = rgb_to_hcv(x)
    return hcv_to_rgb((hue + shift.view(-1, 1, 1).to(x.dtype)) % 1.0, chroma, value)


def pil_box_radius(sigma: Tensor) -> Tensor:
    """Radius of the extended box PIL passes three times for ``GaussianBlur(radius=sigma)``.

    Box variance sigma^2 / 3 per pass, so three passes have variance sigma^2 (Gwosdek et al.
    2011, eqs. 7, 11, 14; Pillow's ``ImagingGaussianBlur``). Shape as ``sigma``, float64.
    """
    var = sigma.double() ** 2 / BLUR_PASSES
    whole = torch.floor((torch.sqrt(12 * var + 1) - 1) / 2)  # integer part of the radius
    frac = (2 * whole + 1) * (whole * (whole + 1) - 3 * var) / (6 * (var - (whole + 1) ** 2))
    return whole + frac


def blur_half_width(max_sigma: float) -> int:
    """Taps on each side of the box kernel that covers every sigma up to ``max_sigma``."""
    var = float(max_sigma) ** 2 / BLUR_PASSES
    whole = math.floor((math.sqrt(12 * var + 1) - 1) / 2)
    frac = (2 * whole + 1) * (whole * (whole + 1) - 3 * var) / (6 * (var - (whole + 1) ** 2))
    return math.floor(whole + frac) + 1


def box_kernels(radius: Tensor, half: int) -> Tensor:
    """Extended-box weights (B, 2 half + 1) for radii (B,), half > floor(max radius).

    Image b: weight 1 / (2 r + 1) on the 2 l + 1 central taps, (r - l) / (2 r + 1) on the two
    next ones, zero beyond (l = floor(r)); each row sums to 1.
    """
    whole = torch.floor(radius)
    offset = torch.arange(-half, half + 1, dtype=torch.float64, device=radius.device).abs()
    inner = (offset[None] <= whole[:, None]).double()
    edge = (offset[None] == whole[:, None] + 1) * (radius - whole)[:, None]
    return ((inner + edge) / (2 * radius + 1)[:, None]).float()


def blur_matrices(sigma: Tensor, size: int, max_sigma: float) -> Tensor:
    """Per-image matrices (B, size, size) of PIL's three box passes along one axis.

    One pass with edge pixels repeated is linear in the row it blurs: output pixel j takes
    weight k[t] from input pixel clamp(j + t - half, 0, size - 1). Three passes are that
    matrix cubed.

    Args:
        sigma: Standard deviations (B,), in (0, max_sigma].
        size: Pixels along the axis.
        max_sigma: The largest sigma that can occur: it sets the kernel width (taps beyond an
            image's own radius weigh zero), a number of the host.
    """
    half = blur_half_width(max_sigma)
    kernel = box_kernels(pil_box_radius(sigma).clamp(max=half - 1e-9), half)  # (B, K)
    device = sigma.device
    source = (torch.arange(size, device=device)[None, :]
              + torch.arange(-half, half + 1, device=device)[:, None]).clamp_(0, size - 1)
    taps = (source[..., None] == torch.arange(size, device=device)).float()  # (K, out, in)
    one = (kernel @ taps.view(len(taps), -1)).view(-1, size, size)  # (B, out, in)
    return one @ one @ one


def gaussian_blur(x: Tensor, sigma: Tensor, max_sigma: float) -> Tensor:
    """PIL's Gaussian blur with its own sigma per image, as two batched matrix products.

    Args:
        x: Images (B, C, H, W).
        sigma: Standard deviations (B,), in (0, max_sigma].
        max_sigma: The largest sigma that can occur (see `blur_matrices`).

    Returns:
        (B, C, H, W): three box passes along the width and three along the height, each with
        edge pixels repeated (as PIL's box blur does at every pass).
    """
    height, width = x.shape[-2:]
    rows = blur_matrices(sigma, height, max_sigma)
    cols = rows if width == height else blur_matrices(sigma, width, max_sigma)
    return resized_crop(x, rows.to(x.dtype), cols.to(x.dtype))


def jitter(x: Tensor, active: Tensor, order: Tensor, factors: Tensor,
           enabled: Tuple[bool, bool, bool, bool]) -> Tensor:
    """ColorJitter on the images where ``active``, its four steps in each image's own order.

    The three blends of an image (brightness with black, contrast with its mean grey level,
    saturation with its grey image) come in its order with the hue shift at its own place:
    three blend passes for the steps before the hue, one hue pass, three for the steps after
    it. A pass leaves an image it does not change exactly as it is (blend factor 1; the hue
    through a select). Every blend is ``clamp(f x + (1 - f) other, 0, 1)``.

    Args:
        x: Images (B, 3, H, W) in [0, 1].
        active: (B,) bool: the images jittered.
        order: (B, 4) integer permutations of 0..3 (brightness, contrast, saturation, hue).
        factors: (B, 4) brightness, contrast, saturation factors and the hue shift.
        enabled: Which of the four the view has (a disabled one is skipped, as torchvision's
            ColorJitter skips a None range).
    """
    hue_at = (order == 3).long().argmax(1, keepdim=True)  # (B, 1) the step of the hue shift
    step = torch.arange(3, device=x.device)  # (3,)
    ops = order.gather(1, step + (step >= hue_at).long())  # (B, 3) the blends in their order
    on = active[:, None].expand(-1, 3)
    for op in range(3):
        if not enabled[op]:
            on = on & (ops != op)
    # Passes 0-2 are the blends before the hue, 3-5 the ones after it: (B, 6) weights.
    on = torch.cat((on & (step < hue_at), on & (step >= hue_at)), 1)
    ops = ops.repeat(1, 2)
    shape = (6, -1, 1, 1, 1)
    factor = torch.where(on, factors.to(x.dtype).gather(1, ops), 1.0).t().reshape(shape)
    to_mean = (ops == 1).to(x.dtype).t().reshape(shape)
    to_gray = (ops == 2).to(x.dtype).t().reshape(shape)
    for i in range(6):
        if i == 3 and enabled[3]:
            x = torch.where(active.view(-1, 1, 1, 1), adjust_hue(x, factors[:, 3]), x)
        gray = grayscale(x)
        other = torch.addcmul(gray.mean((1, 2, 3), keepdim=True) * to_mean[i], gray, to_gray[i])
        x = _blend(x, other, factor[i])
    return x
