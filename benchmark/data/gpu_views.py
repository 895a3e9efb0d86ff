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

The views are computed in float32 with autocast off. NOTE: the crop's resize and the blur are
matrix products, so with TF32 matmuls enabled on an Ampere+ GPU (``torch.backends.cuda.matmul``)
they run in TF32 (about 1e-3 relative), still far below the 1/255 steps of the PIL path.
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
from benchmark.data.view_graph import GraphedCall
from benchmark.data.view_prefetch import SideStream, is_ready, take
from benchmark.data.view_ops import (gaussian_blur, grayscale, jitter, resize_matrices,
                                     resized_crop)
from benchmark.data.view_params import ViewParams, ViewSpec, draw_view_params, view_spec


def is_switch(value) -> bool:
    """Whether ``value`` is one of a device switch's values: 'auto', True or False (not 1 or 0,
    although 1 == True)."""
    return isinstance(value, bool) or value == 'auto'


def batch_generator(seeds: Optional[Tensor]) -> torch.Generator:
    """A CPU generator seeded from the batch's sample seeds (B,), or, without them, from one
    draw of the process's torch generator (which the suite's checkpoints save)."""
    if seeds is None:
        seed = torch.randint(0, 2**62, (1,)).tolist()[0]
    else:
        words = np.random.SeedSequence([int(s) for s in seeds.tolist()]).generate_state(2)
        seed = int(words[0]) << 31 ^ int(words[1])
    return torch.Generator().manual_seed(seed)


PARAM_COLUMNS = 18  # the packed layout of `pack_params`


def pack_params(params: ViewParams) -> Tensor:
    """Parameters drawn on the CPU as one float64 tensor (B, 18): box 0-3, hflip 4, vflip 5,
    jitter 6, factors 7-10, order 11-14, gray 15, blur 16, sigma 17 (integers and flags are
    exact in float64), so that they reach the device in one transfer."""
    p = params
    return torch.cat([p.box.double(), torch.stack((p.hflip, p.vflip, p.jitter), 1).double(),
                      p.factors, p.order.double(), torch.stack((p.gray, p.blur), 1).double(),
                      p.sigma[:, None]], 1)


def to_device(tensor: Tensor, device: torch.device, non_blocking: bool = True) -> Tensor:
    """``tensor`` on ``device``, by an asynchronous copy unless ``non_blocking`` is False. To
    CUDA from pageable host memory a copy waits for the stream to reach it (the device to finish
    the previous step), so the tensor is pinned first unless the loader pinned it."""
    device = torch.device(device)
    if (non_blocking and device.type == 'cuda' and tensor.device.type == 'cpu'
            and not tensor.is_pinned()):
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=non_blocking)


def draw_view(x: Tensor, p: Tensor, spec: ViewSpec) -> Tensor:
    """One view of every image from its packed parameters, in the PIL path's order, as whole-
    batch operations: no subset, no read of the device, the same operations for any batch.

    Crop + resize (+ flips, folded into the resize matrices), colour jitter (four steps in
    each image's own order), grey-scale, blur, normalisation; a jitter step whose range is
    None is left out (as torchvision's ColorJitter does), decided from ``spec`` alone.

    Args:
        x: Images (B, 3, H, W), float in [0, 1], on the target device.
        p: (B, 18) packed parameters (`pack_params`) on the same device.
        spec: The view's settings.

    Returns:
        (B, 3, S, S) with S = spec.input_size, normalised if spec.mean is set.
    """
    (_, _, height, width), size = x.shape, spec.input_size
    flag = p > 0.5  # the 0/1 columns as booleans
    rows = resize_matrices(p[:, 0], p[:, 2], height, size)  # (B, S, H)
    cols = resize_matrices(p[:, 1], p[:, 3], width, size)  # (B, S, W)
    rows = torch.where(flag[:, 5, None, None], rows.flip(1), rows)
    cols = torch.where(flag[:, 4, None, None], cols.flip(1), cols)
    y = resized_crop(x, rows, cols)  # (B, 3, S, S)
    enabled = tuple(r is not None for r in spec.jitter)
    if any(enabled):
        y = jitter(y, flag[:, 6], p[:, 11:15].long(), p[:, 7:11], enabled)
    y = torch.where(flag[:, 15, None, None, None], grayscale(y).expand_as(y), y)
    y = torch.where(flag[:, 16, None, None, None],
                    gaussian_blur(y, p[:, 17], max(spec.sigmas)), y)
    if spec.mean is not None:  # per channel with numbers of the host: nothing to copy over
        for c, (mean, std) in enumerate(zip(spec.mean, spec.std)):
            y[:, c].sub_(mean).div_(std)
    return y


def apply_view(x: Tensor, params: ViewParams, spec: ViewSpec) -> Tensor:
    """`draw_view` from parameters drawn on the CPU (`draw_view_params`)."""
    return draw_view(x, to_device(pack_params(params), x.device), spec)


@MODELS.register_module()
class GPUViewPreprocessor(BaseDataPreprocessor):
    """Move a uint8 batch to the device and draw the contrastive views there.

    One call: both views' parameters drawn on the CPU and copied over in one transfer, the
    batch copied asynchronously, every step a whole-batch operation (`draw_view`); nothing is
    read back from the device, so the host queues the step behind it without waiting. As
    options on a CUDA device (off by default until a GPU run has measured them), the views of
    every full batch replay one CUDA graph (``graph``), and the training loop has them drawn
    one batch ahead on a side stream (``prefetch``, `benchmark.engine.prefetch_loop`), while
    the step before runs.

    Args:
        view: The preset, as a dataset's ``view`` names it: ``'mocov2'``, ``'simclr'`` or
            ``dict(name=..., **overrides of the lightly transform)``.
        input_size: Side of the views in pixels; tools/train.py fills it in from
            ``train_dataloader.dataset.input_size`` (the size evaluation uses) when left out.
        normalize: Dict with ``'mean'`` and ``'std'``, or None to keep values in [0, 1].
        num_views: Views per image (2 for MoCo, SimCLR and MixCo).
        chunk_size: Images drawn together (None: the whole batch, one set of operations).
            Every image's view is computed on its own, so this changes speed only: on a CPU
            chunks that stay in cache can be faster; on a GPU leave it None.
        compile: torch.compile the view drawing (its elementwise steps fused into a few
            kernels; the first batch compiles it). The views are the same up to float32
            rounding.
        graph: Replay the views of every full batch from one CUDA graph
            (``benchmark.data.view_graph``): ``'auto'`` (the default) on a CUDA device and not
            elsewhere, True (a CUDA device is required), or False. The same operations, so the
            same views; measured correct and faster on an H200 (``results/speed/``).
        prefetch: Let the training loop (``PrefetchViewsTrainLoop``) draw the next batch's
            views while the step runs (`prepare`): ``'auto'`` (the default) on a CUDA device
            (on a side stream), True anywhere (on a CPU only earlier, the same views), or
            False; measured correct and faster on an H200 (``results/speed/``).
        non_blocking: Copy the batch to the device asynchronously.
    """

    def __init__(self, view: Union[str, dict] = 'mocov2', input_size: Optional[int] = None,
                 normalize: Optional[Dict[str, List[float]]] = IMAGENET_NORMALIZE,
                 num_views: int = 2, chunk_size: Optional[int] = None, compile: bool = False,
                 graph: Union[bool, str] = 'auto', prefetch: Union[bool, str] = 'auto',
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
        if not isinstance(compile, bool):
            raise ValueError(f'model.data_preprocessor.compile must be True or False, '
                             f'got {compile!r}')
        for name, value in (('graph', graph), ('prefetch', prefetch)):
            if not is_switch(value):
                raise ValueError(f"model.data_preprocessor.{name} must be 'auto', True or "
                                 f"False, got {value!r}")
        self.spec = view_spec(view, input_size, normalize)
        self.num_views, self.chunk_size, self.graph = num_views, chunk_size, graph
        self.prefetch, self._side = prefetch, SideStream()
        # torch.compile compiles at the first call, for the batch's shapes
        self._draw = torch.compile(draw_view, dynamic=False) if compile else draw_view
        self._graphed: Optional[GraphedCall] = None

    def __getstate__(self) -> dict:
        """A copy (``copy.deepcopy``, pickle) without the captured CUDA graphs and the side
        stream, which cannot be copied: the copy makes its own at its first batch."""
        state = dict(super().__getstate__())
        state.update(_graphed=None, _side=SideStream())
        return state

    def views(self, images: Tensor, packed: Tensor) -> Tensor:
        """Every view (num_views * B, 3, S, S) of uint8 images (B, 3, H, W) from packed
        parameters (num_views * B, 18), both on the device: view v of image b is row v B + b."""
        with torch.autocast(device_type=images.device.type, enabled=False):  # views in float32
            x = images.float().div_(255)
            return self.draw(x.repeat(self.num_views, 1, 1, 1), packed)

    def graphed(self, device: torch.device) -> bool:
        """Whether the views on ``device`` replay a CUDA graph (see ``graph``)."""
        if self.graph is True and device.type != 'cuda':
            raise ValueError(f'model.data_preprocessor.graph=True needs a CUDA device, the '
                             f"views run on {device.type}; set graph='auto' (a graph on CUDA "
                             f'only) or False')
        return device.type == 'cuda' and self.graph in ('auto', True)

    def draw(self, x: Tensor, packed: Tensor) -> Tensor:
        """Views (N, 3, S, S) of float images ``x`` (N, 3, H, W) from packed parameters
        (N, 18), in chunks of ``chunk_size`` images."""
        n, step = x.shape[0], self.chunk_size or x.shape[0]
        if step >= n:
            return self._draw(x, packed, self.spec)
        return torch.cat([self._draw(x[i:i + step], packed[i:i + step], self.spec)
                          for i in range(0, n, step)])

    def prefetches(self) -> bool:
        """Whether the training loop should `prepare` each batch ahead (see ``prefetch``)."""
        return self.prefetch is True or (self.prefetch == 'auto' and self.device.type == 'cuda')

    def prepare(self, data: dict) -> dict:
        """The views of a loader batch drawn now, on CUDA on a side stream; `forward` then
        hands them to the step once they are done (without the host waiting). A batch without
        sample seeds is left to `forward`: its parameters come from the process's generator,
        whose draws must stay in the plain loop's order (a resume restores that generator)."""
        if data.get('seed') is None:
            return data
        return self._side.run(self.make, data, self.device)

    def forward(self, data: dict, training: bool = False) -> dict:
        """``dict(inputs=uint8 (B, 3, H, W) or B images (3, H, W) of one size,
        data_samples=..., seed=(B,))``, or a batch
        `prepare` drew, -> ``dict(inputs=[view] * num_views, data_samples=...)`` on the device."""
        return take(data) if is_ready(data) else self.make(data)

    def make(self, data: dict) -> dict:
        """The views of a loader batch (see `forward`)."""
        images = data['inputs']
        if (isinstance(images, (list, tuple)) and images and all(
                isinstance(i, Tensor) and i.shape == images[0].shape for i in images)):
            images = torch.stack(tuple(images))  # a pseudo_collate batch: images of one size
        if not (isinstance(images, Tensor) and images.dtype == torch.uint8 and images.dim() == 4
                and images.shape[1] == 3):
            got = (f'{images.dtype} {tuple(images.shape)}' if isinstance(images, Tensor)
                   else type(images).__name__)
            raise ValueError(f"GPUViewPreprocessor takes uint8 batches (B, 3, H, W), got {got}; "
                             f"set train_dataloader.dataset.view={RAW_VIEW}")
        generator = batch_generator(data.get('seed'))
        b, _, height, width = images.shape
        # Every view of every image in one draw, one transfer and one set of operations.
        packed = pack_params(draw_view_params(self.spec, self.num_views * b, height, width,
                                              generator))
        x = to_device(images, self.device, self._non_blocking)
        packed = to_device(packed, x.device, self._non_blocking)
        if self.graphed(x.device):
            if self._graphed is None:
                self._graphed = GraphedCall(self.views)
            views = self._graphed(x, packed).chunk(self.num_views)
        else:
            views = self.views(x, packed).chunk(self.num_views)
        samples = data.get('data_samples')
        if isinstance(samples, Tensor):
            samples = to_device(samples, x.device, self._non_blocking)
        return dict(inputs=views, data_samples=self.cast_data(samples))
