"""ResumableSampler: DefaultSampler order, per-sample seeds, mid-epoch resume."""
import pytest
from mmengine.dataset import DefaultSampler

from benchmark.data.sampler import ResumableSampler, SampleKey
from benchmark.data.seeding import sample_seed


def test_resumable_sampler_keeps_default_order_and_resumes_mid_epoch():
    data = list(range(20))
    default, ours = DefaultSampler(data, seed=5), ResumableSampler(data, seed=5)
    for epoch in (0, 1):
        default.set_epoch(epoch)
        ours.set_epoch(epoch)
        keys = list(ours)
        assert [k.index for k in keys] == list(default)
        assert all(isinstance(k, SampleKey) and k.seed == sample_seed(5, epoch, k.index)
                   for k in keys)
    ours.set_epoch(1)
    full = list(ours)
    ours.resume_at(1, 6)
    assert list(ours) == full[6:]
    assert list(ours) == full  # only the resumed epoch starts late
    with pytest.raises(ValueError, match='outside'):
        ours.resume_at(1, 21)
