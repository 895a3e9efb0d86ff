"""Time the two MoCo-v2 views of one batch: device path vs kornia (if installed) vs PIL.

    python tools/time_views.py [--batch 64] [--native 64] [--size 224] [--threads 1]

Prints milliseconds per batch (both views), median of --repeats runs, on the CPU (or
--device cuda). The PIL path is lightly's MoCoV2Transform image by image, as one loader
worker runs it; kornia is an AugmentationSequential of the same settings (note: its colour
jitter draws ONE order of the four adjustments per batch, not per image, and its blur is a
sampled Gaussian with a fixed kernel, not PIL's box blur).
"""
import argparse
import os.path as osp
import statistics
import sys
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from benchmark.data.gpu_views import GPUViewPreprocessor  # noqa: E402
from benchmark.data.views import build_view  # noqa: E402


def timed(fn, repeats: int, device: str) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        if device == 'cuda':
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == 'cuda':
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def kornia_views(size: int, device: str):
    import kornia.augmentation as K
    from lightly.transforms.utils import IMAGENET_NORMALIZE
    view = K.AugmentationSequential(
        K.RandomResizedCrop((size, size), scale=(0.2, 1.0)), K.RandomHorizontalFlip(),
        K.ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8), K.RandomGrayscale(p=0.2),
        K.RandomGaussianBlur((13, 13), (0.1, 2.0), p=0.5),  # 2 ceil(3 sigma_max) + 1 taps
        K.Normalize(torch.tensor(IMAGENET_NORMALIZE['mean']),
                    torch.tensor(IMAGENET_NORMALIZE['std']))).to(device)
    return lambda x: [view(x.float() / 255), view(x.float() / 255)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--batch', type=int, default=64)
    parser.add_argument('--native', type=int, default=64, help='side of the decoded images')
    parser.add_argument('--size', type=int, default=224, help='side of the views')
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--device', default='cpu')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = np.random.RandomState(0)
    arrays = rng.randint(0, 256, (args.batch, args.native, args.native, 3), np.uint8)
    x = torch.from_numpy(arrays).permute(0, 3, 1, 2).contiguous().to(args.device)
    seeds = torch.arange(args.batch)
    ours = GPUViewPreprocessor(view='mocov2', input_size=args.size).to(args.device)
    rows = [('device path (this suite)',
             timed(lambda: ours(dict(inputs=x, data_samples=seeds, seed=seeds)), args.repeats,
                   args.device))]
    try:
        views = kornia_views(args.size, args.device)
        rows.append(('kornia', timed(lambda: views(x), args.repeats, args.device)))
    except ImportError:
        rows.append(('kornia', float('nan')))
    pil = build_view('mocov2', args.size)
    images = [Image.fromarray(a) for a in arrays]
    rows.append(('PIL per image (lightly)',
                 timed(lambda: [pil(image) for image in images], args.repeats, 'cpu')))
    print(f'{args.batch} images {args.native} px -> 2 views {args.size} px, '
          f'{args.threads} thread(s), {args.device}, median of {args.repeats}:')
    for name, ms in rows:
        print(f'  {name:<26} {ms:8.1f} ms per batch')


if __name__ == '__main__':
    main()
