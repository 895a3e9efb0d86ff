"""The view presets: shapes, the deterministic test view, overrides, unknown names."""

import re

import numpy as np
import pytest
import torch
from PIL import Image

from benchmark.data.views import build_view


@pytest.mark.parametrize('name, two_views', [
    ('mocov2', True), ('simclr', True), ('linear_train', False), ('test', False)])
def test_view_shapes(name, two_views):
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 50, 3), np.uint8))
    out = build_view(name, 24)(image)
    views = out if two_views else [out]
    assert isinstance(out, list) == two_views and len(views) == (2 if two_views else 1)
    assert all(v.shape == (3, 24, 24) and v.dtype == torch.float32 for v in views)


def test_test_view_is_deterministic_resize_then_crop():
    view = build_view('test', 224, normalize=None)
    assert view.transforms[0].size == 256  # round(224 / 0.875)
    image = Image.new('RGB', (300, 200), (255, 0, 51))
    out = view(image)
    torch.testing.assert_close(out, view(image))
    torch.testing.assert_close(out[:, 0, 0], torch.tensor([1.0, 0.0, 0.2]))


def test_unknown_view_lists_valid_names():
    with pytest.raises(ValueError) as info:
        build_view('moco', 32)
    assert '\n' not in str(info.value) and 'mocov2' in str(info.value) and 'test' in str(info.value)


def test_view_overrides_reach_the_lightly_transform():
    """dict(name=..., **overrides) changes the transform; the preset name keeps the defaults."""
    image = Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8)).convert('RGB')
    torch.manual_seed(0)
    no_flip = build_view(dict(name='mocov2', hf_prob=0.0, min_scale=1.0, cj_prob=0.0,
                              random_gray_scale=0.0, gaussian_blur=0.0), 8, normalize=None)
    a, b = no_flip(image)
    assert torch.equal(a, b)  # nothing random is left, so both views are the plain image
    with pytest.raises(ValueError, match='takes no overrides'):
        build_view(dict(name='test', hf_prob=0.0), 8)


@pytest.mark.parametrize('view, words', [
    (dict(name='mocov2', min_scal=0.2), "unknown override 'min_scal'; valid: 'cj_prob'"),
    (dict(name='mocov2', input_size=8), "unknown override 'input_size'"),
    (dict(name='simclr', min_scale=0), 'min_scale must be in (0, 1], got 0'),
    (dict(name='simclr', hf_prob=1.5), 'hf_prob must be in [0, 1], got 1.5'),
    (dict(name='mocov2', cj_hue=0.6), 'cj_hue must be in [0, 0.5], got 0.6'),
    (dict(name='mocov2', sigmas=[0.1]), 'sigmas must be two numbers > 0'),
])
def test_a_preset_refuses_an_override_no_view_can_use(view, words):
    """lightly's transforms take these without a check; the preset refuses them, naming one."""
    with pytest.raises(ValueError, match=re.escape(f"view '{view['name']}': {words}")):
        build_view(view, 32)
