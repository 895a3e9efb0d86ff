"""Seeds of one sample's views: a function of (run seed, epoch, index), not of the worker."""
import contextlib
import random
from typing import Iterator

import numpy as np
import torch
from torch.utils.data import get_worker_info


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for one sample's augmentation, a function of (run seed, epoch, index)."""
    words = np.random.SeedSequence([seed % 2**63, epoch, index]).generate_state(2, np.uint32)
    return int(words[0]) << 31 ^ int(words[1])


def seed_all(seed: int) -> None:
    """Seed Python's, NumPy's global and torch's CPU generator from ``seed``."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.default_generator.manual_seed(seed)  # the CPU state torch.manual_seed(seed) sets


@contextlib.contextmanager
def seeded_rng(seed: int) -> Iterator[None]:
    """Seed Python, NumPy and torch's CPU generator for the block; in the main process, put
    the previous states back afterwards.

    Augmentations drawn inside depend on ``seed`` only: not on the loader worker, the number of
    workers, or what the process drew before, which is what makes a resumed epoch identical.

    Cost: views are drawn on the CPU, so only torch's CPU generator is seeded
    (`torch.manual_seed` would also reseed every CUDA generator, without putting it back, and
    costs about 0.1 ms per call). In a DataLoader worker the states are not put back: a
    worker's generators serve nothing but the dataset's items, each of which seeds them
    first, and saving NumPy's state (624 words, copied one by one) costs several times the
    seeding. In the main process (``num_workers=0``) the training's own draws (MixCo's
    lambda, shuffle-BN) share the generators, so their states are restored.
    """
    if get_worker_info() is not None:
        seed_all(seed)
        yield
        return
    cpu = torch.default_generator
    saved = (random.getstate(), np.random.get_state(), cpu.get_state())
    seed_all(seed)
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        cpu.set_state(saved[2])
