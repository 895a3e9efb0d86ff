"""Non-finite loss terms and weights are found, named, and stop the run."""
import torch

from benchmark.engine.checkpoint_hook import non_finite_tensors
from benchmark.engine.nan_guard import non_finite_terms


def test_non_finite_detection():
    assert non_finite_terms({'loss': torch.tensor(1.0), 'loss_mix': torch.tensor(float('nan')),
                             'acc': 0.5, 'x': float('inf')}) == ['loss_mix', 'x']
    assert non_finite_tensors({'a': torch.ones(2), 'b': torch.tensor([1.0, float('inf')]),
                               'n': torch.zeros(2, dtype=torch.long)}) == ['b']
