"""Named view presets: the augmentations of pretraining, linear probing and testing.

A preset name is all a config or dataset needs to say (``view='mocov2'``); the
hyperparameters live here, next to their sources.
"""
from __future__ import annotations

import inspect
from typing import Callable, Dict, List, Optional

from lightly.transforms import MoCoV2Transform, SimCLRTransform
from lightly.transforms.utils import IMAGENET_NORMALIZE
from torchvision import transforms as T

from benchmark.data.raw_view import RAW_VIEW, RawImage

VIEW_NAMES = ('mocov2', 'simclr', 'linear_train', 'test', RAW_VIEW)

PRESETS = dict(mocov2=MoCoV2Transform, simclr=SimCLRTransform)  # the ones that take overrides
PROBABILITY = (lambda v: 0 <= v <= 1, 'in [0, 1]')
# What lightly's transforms take without a check although no view can use it.
LIMITS = {**dict.fromkeys(('cj_prob', 'random_gray_scale', 'gaussian_blur', 'vf_prob', 'hf_prob',
                           'rr_prob'), PROBABILITY),
          'min_scale': (lambda v: 0 < v <= 1, 'in (0, 1]'), 'cj_hue': (lambda v: 0 <= v <= 0.5,
                                                                        'in [0, 0.5]'),
          **dict.fromkeys(('cj_strength', 'cj_bright', 'cj_contrast', 'cj_sat'),
                          (lambda v: v >= 0, '>= 0'))}

# Resize-then-center-crop ratio of the standard ImageNet test protocol (256 -> 224).
TEST_CROP_RATIO = 0.875


def check_overrides(name: str, overrides: dict) -> None:
    """Raise ValueError (one line, naming the override) unless every override is a keyword of
    the preset's lightly transform, in a range a view can use (``input_size`` and ``normalize``
    come from the dataset and the preset, not from overrides)."""
    valid = [k for k in inspect.signature(PRESETS[name]).parameters
             if k not in ('input_size', 'normalize')]
    for key, value in overrides.items():
        if key not in valid:
            raise ValueError(f"view {name!r}: unknown override {key!r}; valid: "
                             f"{', '.join(map(repr, valid))}")
        test, text = LIMITS.get(key, (None, ''))
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if test is not None and not (number and test(value)):
            raise ValueError(f'view {name!r}: {key} must be {text}, got {value!r}')
        if key == 'sigmas' and not (isinstance(value, (list, tuple)) and len(value) == 2 and all(
                isinstance(v, (int, float)) and v > 0 for v in value)):
            raise ValueError(f'view {name!r}: sigmas must be two numbers > 0, got {value!r}')


def _to_tensor(normalize: Optional[Dict[str, List[float]]]) -> List[Callable]:
    steps: List[Callable] = [T.ToTensor()]
    if normalize:
        steps.append(T.Normalize(mean=normalize['mean'], std=normalize['std']))
    return steps


def build_view(
    name: str | dict,
    input_size: int,
    normalize: Optional[Dict[str, List[float]]] = IMAGENET_NORMALIZE,
) -> Callable:
    """Build a view preset.

    Args:
        name: One of ``VIEW_NAMES``, or a dict ``dict(name=..., **overrides)`` whose overrides
            go to the lightly transform of a contrastive preset (e.g. ``min_scale``,
            ``hf_prob``); the presets themselves stay the papers' settings. Names:
            ``'mocov2'``: lightly's MoCoV2Transform (MoCo-v2 defaults: crop scale
            0.2-1, jitter 0.4/0.4/0.4/0.1 p=0.8, grayscale 0.2, blur 0.5, flip),
            two views. ``'simclr'``: lightly's SimCLRTransform, two views.
            ``'linear_train'``: RandomResizedCrop + horizontal flip, one view.
            ``'test'``: resize to ``round(input_size / 0.875)`` + center crop, one view.
            ``'raw_uint8'``: the decoded image as a (3, H, W) uint8 tensor at its native size
            (``raw_size=N`` resizes it to N x N), for views drawn on the device by
            ``benchmark.data.gpu_views.GPUViewPreprocessor``; ``input_size`` is not used.
        input_size: Side of the square output in pixels.
        normalize: Dict with ``'mean'`` and ``'std'``, or None to keep values in [0, 1].

    Returns:
        A callable mapping a PIL image to a (3, input_size, input_size) tensor, or to a
        list of two such tensors for the contrastive presets.

    Raises:
        ValueError: If ``name`` is not a preset.
    """
    overrides: dict = {}
    if isinstance(name, dict):
        overrides = dict(name)
        name = overrides.pop('name', None)
        if overrides and name not in ('mocov2', 'simclr', RAW_VIEW):
            raise ValueError(f'view {name!r} takes no overrides; only mocov2, simclr and '
                             f'{RAW_VIEW} do')
        if name in PRESETS:
            check_overrides(name, overrides)
    if name == 'mocov2':
        return MoCoV2Transform(input_size=input_size, normalize=normalize, **overrides)
    if name == 'simclr':
        return SimCLRTransform(input_size=input_size, normalize=normalize, **overrides)
    if name == RAW_VIEW:
        return RawImage(**overrides)
    if name == 'linear_train':
        return T.Compose([T.RandomResizedCrop(input_size), T.RandomHorizontalFlip(),
                          *_to_tensor(normalize)])
    if name == 'test':
        return T.Compose([T.Resize(round(input_size / TEST_CROP_RATIO)),
                          T.CenterCrop(input_size), *_to_tensor(normalize)])
    raise ValueError(f"unknown view {name!r}; valid views: {', '.join(map(repr, VIEW_NAMES))}")
