"""Speed of drawing the two MoCo-v2 views of one batch: the suite's device path
(GPUViewPreprocessor) against lightly's PIL transform image by image (what one loader worker
does) and against kornia when it is installed.

kornia is an AugmentationSequential of the same settings, with two differences: its colour
jitter draws ONE order of the four adjustments per batch, not per image, and its blur is a
sampled Gaussian with a fixed kernel, not PIL's box blur.
"""
import statistics
from typing import Callable, Optional

import numpy as np
import torch

from benchmark.harness.speed.timing import Settings, timed

NOTE = ('milliseconds per batch for both views, median of repeats after one warm-up; PIL runs '
        'image by image on one CPU thread as a loader worker does; the device path (eager, and '
        'on a GPU replayed from a CUDA graph and torch.compile\'d) and kornia run on the '
        'measured device')
# key: (compile, graph) of the device path; the last two are measured on a GPU only
DEVICE_PATHS = {'device_path': (False, False), 'device_path_graphed': (False, True),
                'device_path_compiled': (True, False)}


def median_ms(fn: Callable[[], object], repeats: int, device: torch.device) -> float:
    """Median wall milliseconds of fn() over `repeats` runs after one warm-up run."""
    fn()
    return 1000 * statistics.median(timed(fn, device) for _ in range(repeats))


def kornia_views(size: int, device: torch.device) -> Optional[Callable]:
    """fn(uint8 (B, 3, H, W)) -> two kornia views, or None when kornia is not installed."""
    try:
        import kornia.augmentation as K
    except ImportError:
        return None
    from lightly.transforms.utils import IMAGENET_NORMALIZE
    view = K.AugmentationSequential(
        K.RandomResizedCrop((size, size), scale=(0.2, 1.0)), K.RandomHorizontalFlip(),
        K.ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8), K.RandomGrayscale(p=0.2),
        K.RandomGaussianBlur((13, 13), (0.1, 2.0), p=0.5),  # 2 ceil(3 sigma_max) + 1 taps
        K.Normalize(torch.tensor(IMAGENET_NORMALIZE['mean']),
                    torch.tensor(IMAGENET_NORMALIZE['std']))).to(device)
    return lambda x: [view(x.float() / 255), view(x.float() / 255)]


def bench_views(s: Settings, device: torch.device) -> dict:
    """ms per batch of s.batch images (s.views_native px) -> two views of s.input_size px."""
    from PIL import Image

    from benchmark.data.gpu_views import GPUViewPreprocessor
    from benchmark.data.views import build_view
    rng = np.random.RandomState(0)
    arrays = rng.randint(0, 256, (s.batch, s.views_native, s.views_native, 3), np.uint8)
    x = torch.from_numpy(arrays).permute(0, 3, 1, 2).contiguous().to(device)
    seeds = torch.arange(s.batch)
    ms = {}
    for key, (compiled, graph) in DEVICE_PATHS.items():
        if (compiled or graph) and device.type != 'cuda':
            ms[key] = None  # no CUDA graph there; compiling for a CPU takes minutes
            continue
        ours = GPUViewPreprocessor(view='mocov2', input_size=s.input_size, compile=compiled,
                                   graph=graph).to(device)
        ms[key] = median_ms(lambda: ours(dict(inputs=x, data_samples=seeds, seed=seeds)),
                            s.views_repeats, device)
    kornia = kornia_views(s.input_size, device)
    ms['kornia'] = None if kornia is None else median_ms(lambda: kornia(x), s.views_repeats,
                                                         device)
    pil, images = build_view('mocov2', s.input_size), [Image.fromarray(a) for a in arrays]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a loader worker runs on one thread
    try:
        ms['pil_per_image'] = median_ms(lambda: [pil(image) for image in images],
                                        s.views_repeats, torch.device('cpu'))
    finally:
        torch.set_num_threads(threads)
    return dict(device=str(device), batch=s.batch, native=s.views_native, size=s.input_size,
                repeats=s.views_repeats, ms_per_batch=ms, note=NOTE,
                pil_over_device_path=ms['pil_per_image'] / ms['device_path'])
