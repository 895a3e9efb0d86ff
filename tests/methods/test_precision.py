"""Float32 islands under bfloat16 autocast (methods/precision.py): logits, losses and the queue.

The inputs are rounded to bfloat16 first, so a float64 reference on the very same values is
exact; the losses must match it to float32 accuracy (1e-5). Logits computed in bfloat16 (what
autocast does to a matmul, and on the CPU also to log_softmax) miss it by ~1e-2.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from methods.mixco import mixco_loss
from methods.mixco_moco import MixCoMoCo
from methods.moco import MoCo, info_nce
from methods.precision import at_least_float32

BF16 = dict(device_type='cpu', dtype=torch.bfloat16)


def bf16_unit_rows(*shape, seed):
    """Unit rows in float64, rounded to bfloat16 (returned as bfloat16)."""
    gen = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=gen, dtype=torch.float64), dim=-1).bfloat16()


def naive_info_nce(q, k, queue, tau):
    """float64 loop: mean over rows of -log softmax([q.k, q.queue] / tau)[0]."""
    q, k, queue = q.double(), k.double(), queue.double()
    total = 0.0
    for i in range(q.shape[0]):
        pos = math.exp(float(q[i] @ k[i]) / tau)
        neg = sum(math.exp(float(q[i] @ row) / tau) for row in queue)
        total -= math.log(pos / (pos + neg))
    return total / q.shape[0]


def naive_mix_loss(q_mix, keys, lam, negatives, tau):
    """float64 loop of paper eq. 3: soft targets lam / 1 - lam over [2M keys, negatives]."""
    q_mix, keys, negatives, lam = q_mix.double(), keys.double(), negatives.double(), lam.double()
    m, total = q_mix.shape[0], 0.0
    for i in range(m):
        logits = [float(q_mix[i] @ row) / tau for row in torch.cat([keys, negatives])]
        log_z = math.log(sum(math.exp(v) for v in logits))
        total -= float(lam[i]) * (logits[i] - log_z) + (1 - float(lam[i])) * (logits[m + i] - log_z)
    return total / m


@pytest.mark.parametrize('queue_dtype', [torch.float32, torch.bfloat16])
def test_info_nce_is_float32_under_bf16_autocast(queue_dtype):
    q, k = bf16_unit_rows(8, 32, seed=0), bf16_unit_rows(8, 32, seed=1)
    queue = bf16_unit_rows(64, 32, seed=2).to(queue_dtype)
    with torch.autocast(**BF16):
        loss, acc = info_nce(q, k, queue, temperature=0.2)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(naive_info_nce(q, k, queue, 0.2), rel=1e-5)


@pytest.mark.parametrize('target_mode', ['soft', 'weighted_hard'])
def test_mixco_loss_is_float32_under_bf16_autocast(target_mode):
    """tau_mix = 0.05 multiplies every similarity by 20: bfloat16 logits would be far off."""
    q_mix, keys = bf16_unit_rows(4, 32, seed=3), bf16_unit_rows(8, 32, seed=4)
    negatives = bf16_unit_rows(64, 32, seed=5)
    lam = torch.tensor([0.1, 0.35, 0.6, 0.9])
    with torch.autocast(**BF16):
        loss = mixco_loss(q_mix, keys, lam, negatives, 0.05, target_mode=target_mode)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(naive_mix_loss(q_mix, keys, lam, negatives, 0.05),
                                        rel=1e-5)


def test_gradients_reach_bf16_inputs_in_their_dtype():
    q = bf16_unit_rows(8, 16, seed=6).requires_grad_()
    with torch.autocast(**BF16):
        loss, _ = info_nce(q, bf16_unit_rows(8, 16, seed=7), bf16_unit_rows(32, 16, seed=8), 0.2)
    loss.backward()
    assert q.grad.dtype == torch.bfloat16 and torch.isfinite(q.grad.float()).all()
    assert q.grad.abs().sum() > 0


def test_at_least_float32_keeps_float64_and_integers():
    assert at_least_float32(torch.ones(2, dtype=torch.float64)).dtype == torch.float64
    assert at_least_float32(torch.ones(2, dtype=torch.float16)).dtype == torch.float32
    assert at_least_float32(torch.ones(2, dtype=torch.long)).dtype == torch.long


@pytest.mark.slow
@pytest.mark.parametrize('cls', [MoCo, MixCoMoCo])
def test_queue_stays_float32_with_unit_keys_after_bf16_step(cls):
    """The keys enter the float32 queue normalised in float32 (norm 1 to 1e-6, not bf16's 4e-3)."""
    torch.manual_seed(0)
    model = cls(backbone=dict(depth=18, small_stem=True), feature_dim=16, queue_size=32).train()
    gen = torch.Generator().manual_seed(1)
    views = [torch.randn(8, 3, 16, 16, generator=gen) for _ in range(2)]
    with torch.autocast(**BF16):
        losses = model.loss(views)
    assert model.queue.dtype == torch.float32
    assert all(v.dtype == torch.float32 for k, v in losses.items() if 'loss' in k)
    new_rows = model.queue[:8]  # the pointer started at 0
    torch.testing.assert_close(new_rows.norm(dim=1), torch.ones(8), rtol=0, atol=1e-6)
    assert int(model.queue_ptr) == 8
