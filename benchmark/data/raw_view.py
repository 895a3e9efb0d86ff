"""The ``'raw_uint8'`` view: the decoded image as a uint8 tensor, for views drawn on the device.

With ``view='raw_uint8'`` a dataset hands out the image at its native size, untouched, and
``GPUViewPreprocessor`` (``benchmark.data.gpu_views``) draws the two views on the device.
Batching needs one size: Tiny-ImageNet (64 px), CIFAR (32 px) and digits (8 px) have it; an
ImageFolder of mixed sizes needs ``view=dict(name='raw_uint8', raw_size=N)``, which resizes
the shorter side to N (PIL bilinear, antialiased) and takes the central N x N square on the
CPU. The crop then only sees that square, as after ImageNet's usual resize + centre crop.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from PIL import Image
from torch import Tensor

RAW_VIEW = 'raw_uint8'


class RawImage:
    """PIL RGB image -> (3, H, W) uint8 tensor, optionally resized to ``raw_size`` square.

    Args:
        raw_size: None keeps the native size (every image of the dataset must share it);
            an int resizes the shorter side to it and centre-crops a square.
    """

    # The dataset adds the sample's seed to the item: the device draws the views from it.
    carries_seed = True

    def __init__(self, raw_size: Optional[int] = None) -> None:
        if raw_size is not None and (not isinstance(raw_size, int) or raw_size < 1):
            raise ValueError(f'view raw_uint8: raw_size must be a positive integer or None, '
                             f'got {raw_size!r}')
        self.raw_size = raw_size

    def __call__(self, image: Image.Image) -> Tensor:
        if self.raw_size is not None:
            image = _resize_center(image, self.raw_size)
        array = np.asarray(image.convert('RGB'), dtype=np.uint8)  # (H, W, 3)
        return torch.from_numpy(array.copy()).permute(2, 0, 1).contiguous()

    def __repr__(self) -> str:
        return f'RawImage(raw_size={self.raw_size})'


def _resize_center(image: Image.Image, size: int) -> Image.Image:
    width, height = image.size
    scale = size / min(width, height)
    new = (max(size, round(width * scale)), max(size, round(height * scale)))
    image = image.resize(new, Image.BILINEAR)
    left, top = (new[0] - size) // 2, (new[1] - size) // 2
    return image.crop((left, top, left + size, top + size))
