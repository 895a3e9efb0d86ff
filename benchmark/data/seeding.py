"""Seeds of one sample's views: a function of (run seed, epoch, index), not of the worker."""
import contextlib
import random
from typing import Iterator

import numpy as np
import torch


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
