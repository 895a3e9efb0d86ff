"""The random number generator states of a process, as checkpoint-safe data.

mmengine 0.10.7 saves no RNG state, so a resumed run draws different augmentations, MixCo
lambdas and shuffle-BN permutations than the run it continues. These functions capture and
restore Python's, NumPy's and torch's (CPU and every CUDA device) generators. The captured
form holds only tensors, ints, floats, strings and tuples, so `torch.load(weights_only=True)`
reads it back without allow-listing anything.
"""
import random
from typing import Any, Dict

import numpy as np
import torch


def capture_rng_state() -> Dict[str, Any]:
    """The current RNG states of this process."""
    version, keys, gauss = random.getstate()
    kind, np_keys, pos, has_gauss, cached = np.random.get_state()
    state = dict(
        python=(version, torch.tensor(keys, dtype=torch.int64), gauss),
        numpy=(kind, torch.from_numpy(np_keys.astype(np.int64)), int(pos), int(has_gauss),
               float(cached)),
        torch=torch.get_rng_state(),
    )
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Dict[str, Any]) -> None:
    """Set this process's generators to a `capture_rng_state` result.

    The tensors may arrive on a GPU (mmengine loads checkpoints onto the current device);
    the generators take CPU tensors.
    """
    version, keys, gauss = state['python']
    random.setstate((version, tuple(int(k) for k in keys.tolist()), gauss))
    kind, np_keys, pos, has_gauss, cached = state['numpy']
    np.random.set_state((kind, np_keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state['torch'].cpu())
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state['cuda']])
