"""Contrastive views drawn on the device: an mmengine data preprocessor.

The default path draws the two views with PIL in the loader workers. With

    train_dataloader = dict(dataset=dict(view='raw_uint8'))
    model = dict(data_preprocessor=dict(type='GPUViewPreprocessor', view='mocov2'))

the workers only decode (``benchmark.data.raw_view``), the uint8 batch goes to the model's
device, and `GPUViewPreprocessor` draws both views there with batched tensor operations
(``benchmark.data.view_ops``), every image with its own random parameters drawn as the PIL
path draws them (``benchmark.data.view_params``). The model gets ``inputs=[view_1, view_2]``
as before (MixCo mixes after that, in the model).

Randomness: the parameters come from a CPU ``torch.Generator`` seeded from the batch's sample
seeds, which `ResumableSampler` derives from (sampler seed, epoch, index); a rank's batch at
an iteration is a fixed list of indices, so the generator is a function of (seed, epoch,
iteration, rank), and a resumed run draws the same views bit for bit. The parameters are
drawn on the CPU and copied over, so CPU and GPU runs use the same ones.

The views are computed in float32 with autocast off. NOTE: the crop's resize is a matrix
product, so with TF32 matmuls enabled on an Ampere+ GPU (``torch.backends.cuda.matmul``)
it runs in TF32 (about 1e-3 relative), still far below the 1/255 steps of the PIL path.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Union

import numpy as np
import torch
from lightly.transforms.utils import IMAGENET_NORMALIZE
from mmengine.model import BaseDataPreprocessor
from mmengine.registry import MODELS
from torch import Tensor

from benchmark.data.raw_view import RAW_VIEW
from benchmark.data.view_ops import (adjust_brightness, adjust_contrast, adjust_hue,
                                     adjust_saturation, gaussian_blur, grayscale,
                                     resize_matrices, resized_crop)
from benchmark.data.view_params import ViewParams, ViewSpec, draw_view_params, view_spec

JITTER_FNS = (adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue)


def batch_generator(seeds: Optional[Tensor]) -> torch.Generator:
    """A CPU generator seeded from the batch's sample seeds (B,), or, without them, from one
    draw of the process's torch generator (which the suite's checkpoints save)."""
    if seeds is None:
        seed = int(torch.randint(0, 2**62, (1,)))
    else:
        words = np.random.SeedSequence([int(s) for s in seeds.tolist()]).generate_state(2)
        seed = int(words[0]) << 31 ^ int(words[1])
    return torch.Generator().manual_seed(seed)


def _subset(mask: Tensor, device: torch.device) -> Optional[Tensor]:
    """Indices (on ``device``) where the CPU mask holds, or None; decided on the host."""
    chosen = mask.nonzero()[:, 0]
    return chosen.to(device) if len(chosen) else None


def apply_view(x: Tensor, params: ViewParams, spec: ViewSpec) -> Tensor:
    """Draw one view of every image, in the PIL path's order.

    Crop + resize (+ flips, folded into the resize matrices), colour jitter (four steps in
    each image's own order), grey-scale, blur, normalisation.

    Args:
        x: Images (B, 3, H, W), float in [0, 1], on the target device.
        params: From `draw_view_params` (CPU tensors).
        spec: The view's settings.

    Returns:
        (B, 3, S, S) with S = spec.input_size, normalised if spec.mean is set.
    """
    device, (_, _, height, width), size = x.device, x.shape, spec.input_size
    top, left, crop_h, crop_w = params.box.to(device).unbind(1)
    rows = resize_matrices(top, crop_h, height, size)  # (B, S, H)
    cols = resize_matrices(left, crop_w, width, size)  # (B, S, W)
    rows = torch.where(params.vflip.to(device)[:, None, None], rows.flip(1), rows)
    cols = torch.where(params.hflip.to(device)[:, None, None], cols.flip(1), cols)
    y = resized_crop(x, rows, cols)  # (B, 3, S, S)
    for step in range(len(JITTER_FNS)):
        for op, fn in enumerate(JITTER_FNS):
            chosen = params.jitter & (params.order[:, step] == op)
            idx = _subset(chosen, device) if spec.jitter[op] is not None else None
            if idx is not None:
                y[idx] = fn(y[idx], params.factors[chosen, op].to(device))
    idx = _subset(params.gray, device)
    if idx is not None:
        y[idx] = grayscale(y[idx]).expand(-1, 3, -1, -1)
    idx = _subset(params.blur, device)
    if idx is not None:
        y[idx] = gaussian_blur(y[idx], params.sigma[params.blur])
    if spec.mean is not None:
        mean = torch.tensor(spec.mean, dtype=y.dtype, device=device).view(1, 3, 1, 1)
        std = torch.tensor(spec.std, dtype=y.dtype, device=device).view(1, 3, 1, 1)
        y = (y - mean) / std
    return y


@MODELS.register_module()
class GPUViewPreprocessor(BaseDataPreprocessor):
    """Move a uint8 batch to the device and draw the contrastive views there.

    Args:
        view: The preset, as a dataset's ``view`` names it: ``'mocov2'``, ``'simclr'`` or
            ``dict(name=..., **overrides of the lightly transform)``.
        input_size: Side of the views in pixels; tools/train.py fills it in from
            ``train_dataloader.dataset.input_size`` (the size evaluation uses) when left out.
        normalize: Dict with ``'mean'`` and ``'std'``, or None to keep values in [0, 1].
        num_views: Views per image (2 for MoCo, SimCLR and MixCo).
        chunk_size: Images processed together; every image's view is computed on its own,
            so this changes speed only (on a CPU, 32 images at 224 px stay in cache and ran
            1.3-1.7x faster than 64; None = the whole batch).
        non_blocking: Copy the batch to the device asynchronously.
    """

    def __init__(self, view: Union[str, dict] = 'mocov2', input_size: Optional[int] = None,
                 normalize: Optional[Dict[str, List[float]]] = IMAGENET_NORMALIZE,
                 num_views: int = 2, chunk_size: Optional[int] = 32,
                 non_blocking: bool = True) -> None:
        super().__init__(non_blocking=non_blocking)
        if input_size is None:
            raise ValueError('model.data_preprocessor.input_size: missing; set it to '
                             'train_dataloader.dataset.input_size (tools/train.py does)')
        if num_views < 1:
            raise ValueError(f'model.data_preprocessor.num_views must be >= 1, got {num_views}')
        if chunk_size is not None and chunk_size < 1:
            raise ValueError(f'model.data_preprocessor.chunk_size must be >= 1 or None, '
                             f'got {chunk_size}')
        self.spec = view_spec(view, input_size, normalize)
        self.num_views, self.chunk_size = num_views, chunk_size

    def forward(self, data: dict, training: bool = False) -> dict:
        """``dict(inputs=uint8 (B, 3, H, W), data_samples=..., seed=(B,))`` ->
        ``dict(inputs=[view] * num_views, data_samples=...)`` on the device."""
        images = data['inputs']
        if not (isinstance(images, Tensor) and images.dtype == torch.uint8 and images.dim() == 4
                and images.shape[1] == 3):
            got = (f'{images.dtype} {tuple(images.shape)}' if isinstance(images, Tensor)
                   else type(images).__name__)
            raise ValueError(f"GPUViewPreprocessor takes uint8 batches (B, 3, H, W), got {got}; "
                             f"set train_dataloader.dataset.view={RAW_VIEW}")
        generator = batch_generator(data.get('seed'))
        b, _, height, width = images.shape
        params = [draw_view_params(self.spec, b, height, width, generator)
                  for _ in range(self.num_views)]
        x = images.to(self.device, non_blocking=self._non_blocking)
        step = self.chunk_size or b
        with torch.autocast(device_type=x.device.type, enabled=False):  # views in float32
            x = x.float().div_(255)
            views = [torch.cat([apply_view(x[i:i + step], ViewParams(*(f[i:i + step] for f in p)),
                                           self.spec) for i in range(0, b, step)])
                     for p in params]
        return dict(inputs=views, data_samples=self.cast_data(data.get('data_samples')))

