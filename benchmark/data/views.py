"""Named view presets: the augmentations of pretraining, linear probing and testing.

A preset name is all a config or dataset needs to say (``view='mocov2'``); the
hyperparameters live here, next to their sources.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from lightly.transforms import MoCoV2Transform, SimCLRTransform
from lightly.transforms.utils import IMAGENET_NORMALIZE
from torchvision import transforms as T

VIEW_NAMES = ('mocov2', 'simclr', 'linear_train', 'test')

# Resize-then-center-crop ratio of the standard ImageNet test protocol (256 -> 224).
TEST_CROP_RATIO = 0.875


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
        if overrides and name not in ('mocov2', 'simclr'):
            raise ValueError(f'view {name!r} takes no overrides; only mocov2 and simclr do')
    if name == 'mocov2':
        return MoCoV2Transform(input_size=input_size, normalize=normalize, **overrides)
    if name == 'simclr':
        return SimCLRTransform(input_size=input_size, normalize=normalize, **overrides)
    if name == 'linear_train':
        return T.Compose([T.RandomResizedCrop(input_size), T.RandomHorizontalFlip(),
                          *_to_tensor(normalize)])
    if name == 'test':
        return T.Compose([T.Resize(round(input_size / TEST_CROP_RATIO)),
                          T.CenterCrop(input_size), *_to_tensor(normalize)])
    raise ValueError(f"unknown view {name!r}; valid views: {', '.join(VIEW_NAMES)}")
