"""The arithmetic floor of a step: encoder passes and FLOPs per source image, the device's peak,
and the device's name as the harness reports it and files its results under.

Counting model (encoder passes, in units of one forward of one image): a forward costs 1, the
backward of an image that carries a gradient 2 more, so an image with gradient costs 3 and a key
without one costs 1. The images are counted on a real step of each member (`encoder_images` of
benchmark/evaluation/step_cost.py: forward hooks on its encoders), so a new method is counted as
it runs. Per source image (B source images per step), what the shipped members count:

| member | images with gradient | keys (no gradient) | units | floor vs baseline |
|---|---|---|---|---|
| MoCo-v2 | B queries | B | 3 + 1 = 4 | 1 |
| MixCo (MoCo-v2) | B queries + B/2 mixed | B | 4.5 + 1 = 5.5 | 1.375 |
| i-Mix (MoCo-v2) | B mixed queries only | B | 4 | 1.0 |
| Un-Mix (MoCo-v2) | B queries + B mixed (own pass) | B | 6 + 1 = 7 | 1.75 |
| MoCHi (MoCo-v2) | B queries | B | 4 (+ head, below) | 1.0 + head |
| SimCLR | 2B views | 0 | 6 | 1 |
| MixCo (SimCLR) | 2B views + 2 x B/2 mixed | 0 | 9 | 1.5 |

The head's matrix products (queue logits B·K·D, MoCHi's second q·queue for the hardest
negatives and its B·(s + s')·D synthetic logits) are not in the pass count; FlopCounterMode's
count of a real step (forward + backward) includes them, so both floors are reported.
"""
import os
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

# The counting itself (shared with evaluate_run, which records each run's count) lives in
# benchmark/evaluation/step_cost.py; these names stay importable from here.
from benchmark.evaluation.step_cost import count_flops, encoder_images, pass_units  # noqa: F401

# Dense tensor-core peaks in TFLOP/s (NVIDIA data sheets, SXM parts), matched as substrings of
# torch.cuda.get_device_name(); fp32 is the non-tensor-core rate.
PEAK_TFLOPS: Dict[str, Dict[str, float]] = {
    'H100 80GB HBM3': dict(bf16=989.0, fp32=67.0),  # the H100 SXM5's name in torch
    'H100 SXM': dict(bf16=989.0, fp32=67.0),
    'H200': dict(bf16=989.0, fp32=67.0),
}
NO_PEAK = 'no peak known'


def floor_passes(images: Tuple[float, float], baseline: Tuple[float, float]) -> float:
    """The counting model's time ratio of a member over its baseline, from their
    `encoder_images` (table in the docstring)."""
    return pass_units(images) / pass_units(baseline)


def peak_tflops(device_name: str, precision: str) -> Optional[float]:
    """The table's peak for a device name and 'bf16' or 'fp32', None where none is known."""
    for key, peaks in PEAK_TFLOPS.items():
        if key.lower() in device_name.lower():
            return peaks.get(precision)
    return None


def achieved(images_per_s: float, flops_per_image: float, peak: Optional[float]) -> dict:
    """TFLOP/s of a rate, its share of the peak and the rate the peak would allow (the floor)."""
    tflops = images_per_s * flops_per_image / 1e12
    return dict(tflops=tflops, peak_tflops=peak, peak_fraction=None if peak is None else
                tflops / peak, floor_images_per_s=None if peak is None else
                peak * 1e12 / flops_per_image)


def device_name(device: torch.device) -> str:
    """The accelerator's name, or 'cpu'."""
    return torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()


def describe_device(device: torch.device) -> str:
    """CPU model (and GPU name) with the thread counts the timings ran under."""
    cpu = 'unknown CPU'
    if Path('/proc/cpuinfo').is_file():
        names = [line.split(':', 1)[1].strip() for line in
                 Path('/proc/cpuinfo').read_text().splitlines() if line.startswith('model name')]
        cpu = names[0] if names else cpu
    text = f'{cpu}, {usable_cores()} usable cores, torch threads {torch.get_num_threads()}'
    if device.type == 'cuda':
        text = f'{device_name(device)} (CUDA {torch.version.cuda}); host {text}'
    return text


def device_slug(name: str, cores: int) -> str:
    """File stem of a device's results: 'cpu-2core', 'nvidia-h100-80gb-hbm3'."""
    if name == 'cpu':
        return f'cpu-{cores}core'
    return re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')


def peak_line(name: str, precisions: List[str]) -> str:
    """'NVIDIA H200: bf16 989, fp32 67 TFLOP/s (dense)' or '<name>: no peak known'."""
    peaks = [(p, peak_tflops(name, p)) for p in precisions]
    if any(v is None for _, v in peaks):
        return f'{name}: {NO_PEAK}'
    return f'{name}: ' + ', '.join(f'{p} {v:.0f}' for p, v in peaks) + ' TFLOP/s (dense)'
