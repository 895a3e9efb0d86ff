"""MixCo math (methods/mixco.py) against naive float64 loops from paper eq. 3 and docs/design.md;
MixCo's arguments, one constructor for both MixCo models."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from methods.mixco import (
    MixCoLoss,
    MixCoMixin,
    Mixer,
    mix_pairs,
    mix_targets,
    mixco_loss,
    sample_lambda,
)
from methods.mixco_moco import MixCoMoCo
from methods.mixco_simclr import MixCoSimCLR

TAUS = (0.05, 0.2, 1.0)


# ----------------------------------------------------------------------------- naive references
def naive_mix_pairs(x, lam):
    """Row i = lam[i] * x[i] + (1 - lam[i]) * x[M + i], one row at a time."""
    m = x.shape[0] // 2
    rows = []
    for i in range(m):
        rows.append(lam[i] * x[i] + (1 - lam[i]) * x[m + i])
    return torch.stack(rows)


def dot(u, v):
    """Scalar product as an explicit sum over coordinates."""
    total = u[0] * v[0]
    for d in range(1, u.shape[0]):
        total = total + u[d] * v[d]
    return total


def naive_mix_loss(q_mix, keys, lam, negatives, tau, in_batch_negatives=True):
    """Paper eq. 3 with docs/design.md's normalisation: mean over the M mixed rows.

    Row i's softmax runs over all 2M keys (or only keys i and M + i) followed by the negatives;
    its target is lam_i on key i and 1 - lam_i on key M + i.
    """
    m = q_mix.shape[0]
    negatives = [] if negatives is None else list(negatives)
    total = 0.0
    for i in range(m):
        key_cols = list(range(2 * m)) if in_batch_negatives else [i, m + i]
        logits = [dot(q_mix[i], keys[j]) / tau for j in key_cols]
        logits += [dot(q_mix[i], neg) / tau for neg in negatives]
        log_z = torch.log(sum(torch.exp(logit) for logit in logits))
        logit_i = dot(q_mix[i], keys[i]) / tau
        logit_k = dot(q_mix[i], keys[m + i]) / tau
        total = total - (lam[i] * (logit_i - log_z) + (1 - lam[i]) * (logit_k - log_z))
    return total / m


def unit_rows(*shape):
    return F.normalize(torch.randn(*shape, dtype=torch.float64), dim=-1)


def make_case(m=3, dim=5, num_neg=4, lam=None):
    """Normalised q_mix (M, D), keys (2M, D), negatives (K, D) and lam (M,), float64 leaves."""
    q_mix, keys, negatives = unit_rows(m, dim), unit_rows(2 * m, dim), unit_rows(num_neg, dim)
    lam = torch.rand(m) if lam is None else torch.tensor(lam)
    lam = lam.to(torch.float64)
    return [t.requires_grad_() for t in (q_mix, keys, negatives)] + [lam]


# ----------------------------------------------------------------------------- mix_pairs
@pytest.mark.parametrize('shape', [(6, 3, 4, 4), (8, 7)])
def test_mix_pairs_matches_row_loop(shape):
    """mix_pairs equals a per-row loop for image batches and 2-D batches."""
    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=torch.float64)
    edges = torch.tensor([0.0, 1.0], dtype=torch.float64)
    lam = torch.cat([edges, torch.rand(shape[0] // 2 - 2, dtype=torch.float64)])
    out = mix_pairs(x, lam)
    assert out.shape == (shape[0] // 2, *shape[1:])
    torch.testing.assert_close(out, naive_mix_pairs(x, lam), rtol=0, atol=1e-12)


def test_mix_pairs_pairs_first_half_with_second_half():
    """lam = 1 returns the first half and lam = 0 returns the second half."""
    x = torch.arange(8, dtype=torch.float64).view(4, 2)
    torch.testing.assert_close(mix_pairs(x, torch.ones(2, dtype=torch.float64)), x[:2])
    torch.testing.assert_close(mix_pairs(x, torch.zeros(2, dtype=torch.float64)), x[2:])


def test_mix_pairs_gradients_match_loop_and_analytic():
    """Gradients w.r.t. x and lam equal the loop version's and the analytic ones."""
    torch.manual_seed(1)
    x = torch.randn(6, 3, 2, 2, dtype=torch.float64, requires_grad=True)
    lam = torch.rand(3, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(3, 3, 2, 2, dtype=torch.float64)
    gx, glam = torch.autograd.grad((weight * mix_pairs(x, lam)).sum(), (x, lam))
    gx_ref, glam_ref = torch.autograd.grad((weight * naive_mix_pairs(x, lam)).sum(), (x, lam))
    torch.testing.assert_close(gx, gx_ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(glam, glam_ref, rtol=0, atol=1e-12)
    # d/dx_i = lam_i w_i, d/dx_{M+i} = (1 - lam_i) w_i, d/dlam_i = <w_i, x_i - x_{M+i}>
    for i in range(3):
        torch.testing.assert_close(gx[i], lam[i].detach() * weight[i])
        torch.testing.assert_close(gx[3 + i], (1 - lam[i].detach()) * weight[i])
        torch.testing.assert_close(glam[i], (weight[i] * (x[i] - x[3 + i])).sum().detach())


def test_mix_pairs_rejects_odd_batch_and_wrong_lam_shape():
    """Odd batches and lam of the wrong shape raise ValueError."""
    with pytest.raises(ValueError):
        mix_pairs(torch.randn(5, 3), torch.rand(2))
    with pytest.raises(ValueError):
        mix_pairs(torch.randn(6, 3), torch.rand(2))
    with pytest.raises(ValueError):
        mix_pairs(torch.randn(6, 3), torch.rand(3, 1))


# ----------------------------------------------------------------------------- mixco_loss
@pytest.mark.parametrize('tau', TAUS)
@pytest.mark.parametrize('with_negatives', [True, False])
def test_mixco_loss_matches_naive_loop(tau, with_negatives):
    """mixco_loss equals the naive eq. 3 loop, incl. lam = 0 and lam = 1 rows."""
    torch.manual_seed(2)
    q_mix, keys, negatives, lam = make_case(m=4, lam=[0.0, 1.0, 0.25, 0.7])
    negatives = negatives if with_negatives else None
    got = mixco_loss(q_mix, keys, lam, negatives, temperature=tau)
    want = naive_mix_loss(q_mix, keys, lam, negatives, tau)
    assert abs(got.item() - want.item()) < 1e-6


@pytest.mark.parametrize('tau', TAUS)
def test_mixco_loss_module_matches_naive_loop(tau):
    """MixCoLoss (the public module) equals the naive loop for random lam."""
    torch.manual_seed(3)
    q_mix, keys, negatives, lam = make_case(m=3, num_neg=6)
    got = MixCoLoss(temperature=tau)(q_mix, keys, lam, negatives)
    want = naive_mix_loss(q_mix, keys, lam, negatives, tau)
    assert got.dim() == 0
    assert abs(got.item() - want.item()) < 1e-6


@pytest.mark.cuda
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_mixco_loss_on_cuda_matches_the_cpu_naive_loop(dtype):
    """On the GPU, in float32 (as training runs it) and float64: value and gradients against the
    float64 loop on the CPU (float32 to 1e-5: tf32 is not used by these matmuls' defaults)."""
    torch.manual_seed(6)
    q_mix, keys, negatives, lam = make_case(m=8, dim=16, num_neg=32)
    on_gpu = [t.detach().to('cuda', dtype).requires_grad_() for t in (q_mix, keys, negatives)]
    got = MixCoLoss(0.05)(*on_gpu[:2], lam.to('cuda', dtype), on_gpu[2])
    want = naive_mix_loss(q_mix, keys, lam, negatives, 0.05)
    tol = 1e-5 if dtype == torch.float32 else 1e-9
    assert got.device.type == 'cuda' and abs(got.item() - want.item()) < tol * max(1, abs(want.item()))
    grads = torch.autograd.grad(got, on_gpu)
    for g, w in zip(grads, torch.autograd.grad(want, [q_mix, keys, negatives])):
        torch.testing.assert_close(g.cpu().double(), w, rtol=0, atol=tol * 10)


def test_mixco_loss_default_temperature_is_paper_value():
    """MixCoLoss() uses tau_mix = 0.05."""
    torch.manual_seed(4)
    q_mix, keys, negatives, lam = make_case()
    got = MixCoLoss()(q_mix, keys, lam, negatives)
    assert abs(got.item() - naive_mix_loss(q_mix, keys, lam, negatives, 0.05).item()) < 1e-6


@pytest.mark.parametrize('tau', (0.05, 0.5))
@pytest.mark.parametrize('with_negatives', [True, False])
def test_mixco_loss_gradients_match_naive_loop(tau, with_negatives):
    """Gradients w.r.t. q_mix, keys and negatives equal the naive loop's."""
    torch.manual_seed(5)
    q_mix, keys, negatives, lam = make_case(m=3, lam=[0.0, 0.4, 1.0])
    negatives = negatives if with_negatives else None
    inputs = [q_mix, keys] + ([negatives] if with_negatives else [])
    got = torch.autograd.grad(MixCoLoss(tau)(q_mix, keys, lam, negatives), inputs)
    want = torch.autograd.grad(naive_mix_loss(q_mix, keys, lam, negatives, tau), inputs)
    for g, w in zip(got, want):
        assert g.abs().max() > 0
        torch.testing.assert_close(g, w, rtol=0, atol=1e-6)


@pytest.mark.parametrize('lam', [0.0, 0.3, 1.0])
def test_mixco_loss_two_key_closed_form(lam):
    """M = 1, no negatives: loss = -lam log s((a - b)/tau) - (1 - lam) log s((b - a)/tau)."""
    torch.manual_seed(6)
    tau = 0.1
    q_mix, keys = unit_rows(1, 4), unit_rows(2, 4)
    a, b = (q_mix[0] @ keys[0]).item(), (q_mix[0] @ keys[1]).item()

    def log_sigmoid(t):
        return -math.log1p(math.exp(-t))

    want = -lam * log_sigmoid((a - b) / tau) - (1 - lam) * log_sigmoid((b - a) / tau)
    got = mixco_loss(q_mix, keys, torch.tensor([lam], dtype=torch.float64), temperature=tau)
    assert abs(got.item() - want) < 1e-9


def test_mix_targets_structure():
    """Rows sum to 1, lam at column i, 1 - lam at M + i, zeros elsewhere (incl. negatives)."""
    lam = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    targets = mix_targets(lam, 6 + 4)
    assert targets.shape == (3, 10)
    torch.testing.assert_close(targets.sum(1), torch.ones(3, dtype=torch.float64))
    assert ((targets != 0).sum(1) == 2).all()
    assert (targets[:, 6:] == 0).all()
    for i in range(3):
        assert targets[i, i] == lam[i] and targets[i, 3 + i] == 1 - lam[i]


@pytest.mark.parametrize('in_batch', [True, False])
def test_weighted_hard_equals_soft(in_batch):
    """target_mode='weighted_hard' gives the same value and gradients as 'soft'."""
    torch.manual_seed(7)
    q_mix, keys, negatives, lam = make_case(m=3, lam=[0.0, 0.6, 1.0])
    soft = mixco_loss(q_mix, keys, lam, negatives, 0.05, in_batch, 'soft')
    hard = MixCoLoss(0.05, in_batch, 'weighted_hard')(q_mix, keys, lam, negatives)
    assert abs(soft.item() - hard.item()) < 1e-9
    for g_soft, g_hard in zip(torch.autograd.grad(soft, (q_mix, keys, negatives)),
                              torch.autograd.grad(hard, (q_mix, keys, negatives))):
        torch.testing.assert_close(g_soft, g_hard, rtol=0, atol=1e-9)


@pytest.mark.parametrize('target_mode', ['soft', 'weighted_hard'])
@pytest.mark.parametrize('with_negatives', [True, False])
def test_without_in_batch_negatives_matches_naive_loop(target_mode, with_negatives):
    """in_batch_negatives=False: row i's softmax holds only keys i, M + i and the negatives."""
    torch.manual_seed(8)
    q_mix, keys, negatives, lam = make_case(m=4, lam=[0.0, 1.0, 0.2, 0.55])
    negatives = negatives if with_negatives else None
    got = mixco_loss(q_mix, keys, lam, negatives, 0.2, in_batch_negatives=False,
                     target_mode=target_mode)
    want = naive_mix_loss(q_mix, keys, lam, negatives, 0.2, in_batch_negatives=False)
    assert abs(got.item() - want.item()) < 1e-6
    full = naive_mix_loss(q_mix, keys, lam, negatives, 0.2, in_batch_negatives=True)
    assert abs(full.item() - want.item()) > 1e-3  # the option changes the loss


def test_mixco_loss_rejects_mismatched_shapes():
    """keys not (2M, D) or lam not (M,) raise ValueError."""
    q_mix, keys, negatives, lam = make_case(m=3)
    with pytest.raises(ValueError):
        mixco_loss(q_mix, keys[:5], lam, negatives)
    with pytest.raises(ValueError):
        mixco_loss(q_mix, keys, lam[:2], negatives)


# ----------------------------------------------------------------------------- sampling lambda
def test_sample_lambda_shape_range_and_reproducible():
    """lam has shape (M,), lies in [0, 1], repeats under the same torch seed, differs otherwise."""
    torch.manual_seed(9)
    first = sample_lambda(64, torch.device('cpu'))
    torch.manual_seed(9)
    again = sample_lambda(64, torch.device('cpu'))
    torch.manual_seed(10)
    other = sample_lambda(64, torch.device('cpu'))
    assert first.shape == (64,)
    assert ((first >= 0) & (first <= 1)).all()
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert first.unique().numel() == 64  # one ratio per pair


@pytest.mark.parametrize('distribution', ['uniform', 'beta'])
def test_sample_lambda_batch_scope_shares_one_value(distribution):
    """scope='batch' gives M equal values."""
    torch.manual_seed(11)
    lam = sample_lambda(5, torch.device('cpu'), distribution, alpha=0.5, scope='batch')
    assert lam.shape == (5,)
    assert (lam == lam[0]).all()


def test_sample_lambda_beta_has_beta_variance():
    """'beta' draws from Beta(alpha, alpha): variance 1/(4(2 alpha + 1)), vs 1/12 for uniform."""
    torch.manual_seed(12)
    beta = sample_lambda(20000, torch.device('cpu'), 'beta', alpha=0.5)
    uniform = sample_lambda(20000, torch.device('cpu'), 'uniform')
    assert ((beta >= 0) & (beta <= 1)).all()
    assert abs(beta.mean().item() - 0.5) < 0.02
    assert abs(beta.var().item() - 1 / 8) < 0.01
    assert abs(uniform.var().item() - 1 / 12) < 0.01
    torch.manual_seed(12)
    assert torch.equal(beta, sample_lambda(20000, torch.device('cpu'), 'beta', alpha=0.5))


@pytest.mark.parametrize('distribution', ['uniform', 'beta'])
def test_sample_lambda_ignores_numpy_rng(distribution):
    """Same torch seed, different numpy seeds: the same lam."""
    draws = []
    for np_seed in (0, 1):
        np.random.seed(np_seed)
        torch.manual_seed(13)
        draws.append(sample_lambda(8, torch.device('cpu'), distribution, alpha=0.4))
    assert torch.equal(draws[0], draws[1])


def test_sample_lambda_rejects_unknown_options():
    """Unknown distribution or scope raise ValueError."""
    with pytest.raises(ValueError):
        sample_lambda(4, torch.device('cpu'), distribution='gauss')
    with pytest.raises(ValueError):
        sample_lambda(4, torch.device('cpu'), scope='sample')


# ----------------------------------------------------------------------------- Mixer
def test_mixer_halves_pairing():
    """Default Mixer: x_mix[i] = lam[i] x[i] + (1 - lam[i]) x[M + i], order None."""
    torch.manual_seed(14)
    x = torch.randn(6, 3, 4, 4, dtype=torch.float64)
    x_mix, lam, order = Mixer()(x)
    assert order is None and lam.shape == (3,)
    for i in range(3):
        want = lam[i].double() * x[i] + (1 - lam[i].double()) * x[3 + i]
        torch.testing.assert_close(x_mix[i], want)


def test_mixer_permutation_pairing():
    """pairing='permutation': x_mix[i] = lam[i] x[order[i]] + (1 - lam[i]) x[order[M + i]]."""
    torch.manual_seed(15)
    x = torch.randn(8, 2, 3, 3, dtype=torch.float64)
    x_mix, lam, order = Mixer(pairing='permutation')(x)
    assert sorted(order.tolist()) == list(range(8))
    assert not torch.equal(order, torch.arange(8))  # seed 15 draws a non-identity permutation
    for i in range(4):
        want = lam[i].double() * x[order[i]] + (1 - lam[i].double()) * x[order[4 + i]]
        torch.testing.assert_close(x_mix[i], want)


def test_mixer_rejects_odd_batch_and_bad_options():
    """Odd batches and unknown options raise ValueError."""
    with pytest.raises(ValueError):
        Mixer()(torch.randn(5, 3))
    with pytest.raises(ValueError):
        Mixer(pairing='random')
    with pytest.raises(ValueError):
        Mixer(distribution='beta', alpha=0.0)


# ----------------------------------------------------------------------------- MixCo's arguments
def test_both_mixco_models_take_one_constructor_with_their_own_defaults(tiny_backbones):
    moco, simclr = MixCoMoCo(queue_size=16), MixCoSimCLR()
    assert MixCoMixin in MixCoMoCo.__mro__ and MixCoMixin in MixCoSimCLR.__mro__
    assert (moco.mix_loss.temperature, moco.mix_joint_forward) == (0.05, True)  # the paper's
    assert (simclr.mix_loss.temperature, simclr.mix_joint_forward) == (0.5, False)  # authors'
    for model in (moco, simclr):
        assert (model.mix_weight, model.mix_loss.in_batch_negatives, model.mix_loss.target_mode,
                vars(model.mixer)) == (1.0, True, 'soft', dict(distribution='uniform', alpha=1.0,
                                                               scope='pair', pairing='halves'))


@pytest.mark.parametrize('cls', [MixCoMoCo, MixCoSimCLR])
@pytest.mark.parametrize('option,words', [
    (dict(mix_weight=-1.0), 'mix_weight must be >= 0'), (dict(mix_lambda='gauss'), 'mix_lambda'),
    (dict(mix_alpha=0.0), 'mix_alpha must be > 0'), (dict(mix_pairing='random'), 'mix_pairing'),
    (dict(mix_lambda_scope='step'), 'mix_lambda_scope'), (dict(mix_target='hard'), 'target_mode'),
    (dict(mix_temperature=0.0), 'temperature must be > 0'),
])
def test_both_mixco_models_refuse_bad_mix_arguments_alike(cls, option, words, tiny_backbones):
    with pytest.raises(ValueError, match=words):
        cls(**option)
