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


class _SeededDraws(torch.utils.data.Dataset):
    """Item i: the draws of seeded_rng(seeds[i]), wherever it is loaded."""

    def __init__(self, seeds):
        self.seeds = seeds

    def __len__(self):
        return len(self.seeds)

    def __getitem__(self, i):
        with seeded_rng(self.seeds[i]):
            return _draws()


def test_draws_in_a_loader_worker_equal_those_of_the_main_process_and_of_manual_seed():
    """A worker skips putting the states back (its generators serve only the items), the main
    process restores them; the draws of a seed are the same either way, and the same as after
    seeding everything with torch.manual_seed."""
    seeds = [0, 7, 2**62 + 5, sample_seed(3, 1, 4)]
    reference = []
    for seed in seeds:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        reference.append(_draws())
    dataset = _SeededDraws(seeds)
    main = [dataset[i] for i in range(len(seeds))]
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    workers = [tuple(float(v) for v in item) for item in loader]
    assert main == reference and workers == reference


def test_seeded_rng_seeds_only_the_cpu_generator(monkeypatch):
    """torch.manual_seed (which also reseeds every CUDA generator, unrestored) is not used."""
    def refuse(seed):
        raise AssertionError('torch.manual_seed called')
    monkeypatch.setattr(torch, 'manual_seed', refuse)
    with seeded_rng(5):
        torch.rand(1)
