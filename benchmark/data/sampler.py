"""A training sampler that can resume part-way through an epoch and seeds each sample's views."""
from typing import Iterator, NamedTuple, Optional, Sized

from mmengine.dataset import DefaultSampler
from mmengine.registry import DATA_SAMPLERS

from benchmark.data.seeding import sample_seed


class SampleKey(NamedTuple):
    """What `ResumableSampler` yields: the dataset index and the seed of its augmentation.

    The suite's datasets accept a SampleKey wherever they accept an int index.
    """
    index: int
    seed: int


@DATA_SAMPLERS.register_module()
class ResumableSampler(DefaultSampler):
    """mmengine's `DefaultSampler` (same order, same sharding) plus two things for resume.

    * Each sample comes with a seed derived from (sampler seed, epoch, index), so its views are
      the same whichever worker loads it and whether or not the run was interrupted.
    * `resume_at(epoch, position)` makes the next iteration of that epoch start at
      ``position`` (samples of this process), so a run resumed from an iteration checkpoint
      sees exactly the batches the uninterrupted run would have seen.

    Args:
        dataset: The dataset.
        shuffle: Shuffle every epoch (seeded by ``seed + epoch``).
        seed: Shuffle seed shared by all processes; None draws one and syncs it.
        round_up: Pad so every process gets the same number of samples.
    """

    def __init__(self, dataset: Sized, shuffle: bool = True, seed: Optional[int] = None,
                 round_up: bool = True) -> None:
        if seed is not None and not 0 <= seed < 2 ** 32:  # the run's seed, numpy's range
            raise ValueError(f'seed must be in [0, 2**32) or None, got {seed}')
        super().__init__(dataset, shuffle=shuffle, seed=seed, round_up=round_up)
        self._resume: Optional[tuple] = None

    def resume_at(self, epoch: int, position: int) -> None:
        """Start epoch ``epoch`` at sample ``position`` of this process's shard."""
        if not 0 <= position <= self.num_samples:
            raise ValueError(f'resume position {position} outside 0..{self.num_samples}')
        self._resume = (epoch, position)

    def __iter__(self) -> Iterator[SampleKey]:
        indices = list(super().__iter__())
        if self._resume is not None and self._resume[0] == self.epoch:
            indices = indices[self._resume[1]:]
            self._resume = None
        return iter([SampleKey(int(i), sample_seed(self.seed, self.epoch, int(i)))
                     for i in indices])
