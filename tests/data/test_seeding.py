"""Per-sample seeds and seeded scopes of the views."""
import random

import numpy as np
import torch

from benchmark.data.seeding import sample_seed, seeded_rng
from benchmark.engine.rng_state import capture_rng_state, restore_rng_state


def _draws():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_seeded_rng_is_deterministic_and_restores_the_outer_state():
    torch.manual_seed(1)
    outer = capture_rng_state()
    with seeded_rng(123):
        first = _draws()
    after = _draws()
    restore_rng_state(outer)
    with seeded_rng(123):
        assert _draws() == first
    assert _draws() == after  # the block did not consume the outer generators


def test_sample_seed_depends_on_seed_epoch_and_index():
    seeds = {sample_seed(s, e, i) for s in (0, 1) for e in (0, 1) for i in (0, 1)}
    assert len(seeds) == 8
    assert sample_seed(0, 3, 7) == sample_seed(0, 3, 7)
    assert all(0 <= s < 2**63 for s in seeds)
