"""RNG states of a process survive a weights-only checkpoint round trip."""
import io
import random

import numpy as np
import torch

from benchmark.engine.rng_state import capture_rng_state, restore_rng_state


def _draws():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_rng_state_roundtrip_through_a_weights_only_load():
    state = capture_rng_state()
    expected = _draws()
    buffer = io.BytesIO()
    torch.save({'rng_states': [state]}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)['rng_states'][0]
    _draws()
    restore_rng_state(loaded)
    assert _draws() == expected
