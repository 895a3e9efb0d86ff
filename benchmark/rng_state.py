"""The random number generator states of a process, as checkpoint-safe data, and seeded scopes.

mmengine 0.10.7 saves no RNG state, so a resumed run draws different augmentations, MixCo
lambdas and shuffle-BN permutations than the run it continues. These functions capture and
restore Python's, NumPy's and torch's (CPU and every CUDA device) generators. The captured
form holds only tensors, ints, floats, strings and tuples, so `torch.load(weights_only=True)`
reads it back without allow-listing anything.
"""
import contextlib
import random
from typing import Any, Dict, Iterator

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


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for one sample's augmentation, a function of (run seed, epoch, index)."""
    words = np.random.SeedSequence([seed % 2**63, epoch, index]).generate_state(2, np.uint32)
    return int(words[0]) << 31 ^ int(words[1])


@contextlib.contextmanager
def seeded_rng(seed: int) -> Iterator[None]:
    """Seed Python, NumPy and torch (CPU) for the block, then put the previous states back.

    Augmentations drawn inside depend on ``seed`` only: not on the loader worker, the number of
    workers, or what the process drew before, which is what makes a resumed epoch identical.
    """
    saved = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.set_rng_state(saved[2])
