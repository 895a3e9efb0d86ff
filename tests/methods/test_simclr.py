"""SimCLR and MixCo on SimCLR (methods/simclr.py, mixco_simclr.py) vs naive float64 loops."""
import pytest
import torch
import torch.nn.functional as F
from lightly.loss import NTXentLoss

from methods.mixco import MixCoLoss
from methods.mixco_simclr import MixCoSimCLR
from methods.simclr import NTXent, SimCLR

BACKBONE = dict(depth=18, small_stem=True)


# ----------------------------------------------------------------------------- naive references
def dot(u, v):
    return sum(u[d] * v[d] for d in range(u.shape[0]))


def naive_nt_xent(z_a, z_b, tau):
    """NT-Xent: 2B x 2B similarities, positive of i is B + i (and back), self excluded, mean."""
    z = torch.cat([z_a, z_b])
    n, b = z.shape[0], z_a.shape[0]
    total = 0.0
    for i in range(n):
        pos = (i + b) % n
        denom = sum(torch.exp(dot(z[i], z[j]) / tau) for j in range(n) if j != i)
        total = total - (dot(z[i], z[pos]) / tau - torch.log(denom))
    return total / n


def naive_mix_loss(q_mix, keys, lam, tau):
    """Paper eq. 3 without a queue, mean over M rows: lam on key i, 1 - lam on key M + i."""
    m = q_mix.shape[0]
    total = 0.0
    for i in range(m):
        logits = [dot(q_mix[i], keys[j]) / tau for j in range(2 * m)]
        log_z = torch.log(sum(torch.exp(v) for v in logits))
        total = total - (lam[i] * (logits[i] - log_z) + (1 - lam[i]) * (logits[m + i] - log_z))
    return total / m


def naive_mix(x, lam, order=None):
    """x_mix[i] = lam_i x[order[i]] + (1 - lam_i) x[order[M + i]] (order = identity by default)."""
    m = x.shape[0] // 2
    order = list(range(2 * m)) if order is None else order.tolist()
    return torch.stack([lam[i] * x[order[i]] + (1 - lam[i]) * x[order[m + i]] for i in range(m)])


class FixedMixer:
    """The model's Mixer, fixed: call n returns (naive mix of x.detach(), lams[n], orders[n]).

    Mixing the detached batch keeps the gradient of the mixed branch away from the views, so a
    view's gradient comes only from its unmixed projections.
    """

    def __init__(self, lams, orders=(None, None)):
        self.lams, self.orders, self.calls = lams, orders, 0

    def __call__(self, x):
        lam, order = self.lams[self.calls].to(x.dtype), self.orders[self.calls]
        self.calls += 1
        return naive_mix(x.detach(), lam, order), lam, order


def build(cls, seed=0, **kwargs):
    """A tiny float64 model (ResNet-18, small stem) with a 16-d head."""
    torch.manual_seed(seed)
    return cls(backbone=BACKBONE, feature_dim=16, **kwargs).double()


def views(b=4, seed=1):
    torch.manual_seed(seed)
    return [torch.randn(b, 3, 8, 8, dtype=torch.float64) for _ in range(2)]


# ----------------------------------------------------------------------------- SimCLR
@pytest.mark.parametrize('joint', (False, True))
@pytest.mark.parametrize('tau', (0.1, 0.5))
def test_simclr_loss_matches_naive_nt_xent(tau, joint):
    """loss_inst equals the naive NT-Xent on the model's own embeddings (same BN passes)."""
    model = build(SimCLR, temperature=tau, joint_forward=joint)
    x_a, x_b = views()
    if joint:
        z_a, z_b = model.embed(torch.cat([x_a, x_b])).chunk(2)  # one pass, as the model's
    else:
        z_a, z_b = model.embed(x_a), model.embed(x_b)  # a pass per view, as the model's
    losses = model([x_a, x_b], mode='loss')
    assert abs(losses['loss_inst'].item() - naive_nt_xent(z_a, z_b, tau).item()) < 1e-6


@pytest.mark.parametrize('n, dtype', [(1, torch.float64), (2, torch.float32), (7, torch.float32),
                                      (16, torch.float64)])
def test_nt_xent_equals_lightlys_bit_for_bit(n, dtype):
    """The loss and its gradients equal lightly's NTXentLoss exactly (its boolean mask and the
    gather select the same logits in the same order), and the naive loop's."""
    torch.manual_seed(n)
    inputs = [torch.randn(n, 5, dtype=dtype, requires_grad=True) for _ in range(2)]
    ours = NTXent(temperature=0.3)(*inputs)
    grads = torch.autograd.grad(ours, inputs)
    theirs = NTXentLoss(temperature=0.3)(*inputs)
    assert torch.equal(ours, theirs)
    assert all(map(torch.equal, grads, torch.autograd.grad(theirs, inputs)))
    want = naive_nt_xent(*[F.normalize(x.detach().double(), dim=1) for x in inputs], 0.3)
    assert abs(ours.item() - want.item()) < 1e-5


def test_simclr_embed_is_normalised():
    """embed returns unit-norm rows."""
    z = build(SimCLR).embed(views()[0])
    torch.testing.assert_close(z.norm(dim=1), torch.ones(4, dtype=torch.float64))


# ----------------------------------------------------------------------------- MixCoSimCLR
def naive_mixco_simclr(model, x_a, x_b, lams, orders, tau, tau_mix, beta):
    """loss_inst and beta * (L_mix(zm_a vs z_b, lam_a) + L_mix(zm_b vs z_a, lam_b)) / 2."""
    z_a, z_b = model.embed(x_a), model.embed(x_b)
    zm_a = model.embed(naive_mix(x_a.detach(), lams[0].double(), orders[0]))
    zm_b = model.embed(naive_mix(x_b.detach(), lams[1].double(), orders[1]))
    keys_a = z_b if orders[0] is None else z_b[orders[0]]
    keys_b = z_a if orders[1] is None else z_a[orders[1]]
    loss_mix = 0.5 * (naive_mix_loss(zm_a, keys_a, lams[0].double(), tau_mix)
                      + naive_mix_loss(zm_b, keys_b, lams[1].double(), tau_mix))
    return naive_nt_xent(z_a, z_b, tau), beta * loss_mix


ORDERS = [(None, None), (torch.tensor([2, 0, 3, 1]), torch.tensor([1, 3, 0, 2]))]


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('joint', [True, False])
def test_mixco_simclr_matches_naive_reference(orders, joint):
    """Each view mixed with its own lam, scored against the other view; halves; beta-weighted."""
    lams = (torch.tensor([0.0, 0.8]), torch.tensor([0.3, 1.0]))
    model = build(MixCoSimCLR, temperature=0.5, mix_temperature=0.2, mix_weight=0.7,
                  mix_joint_forward=joint).eval()
    model.mixer = FixedMixer(lams, orders)
    x_a, x_b = views()
    losses = model([x_a, x_b], mode='loss')
    assert model.mixer.calls == 2
    assert set(losses) == {'loss_inst', 'loss_mix', 'acc_inst', 'lam_mean'}
    want_inst, want_mix = naive_mixco_simclr(model, x_a, x_b, lams, orders, 0.5, 0.2, 0.7)
    assert abs(losses['loss_inst'].item() - want_inst.item()) < 1e-5
    assert abs(losses['loss_mix'].item() - want_mix.item()) < 1e-5
    assert losses['lam_mean'].item() == pytest.approx(torch.cat(lams).mean().item())


def test_mixco_simclr_views_use_their_own_lambda():
    """Swapping the two views' lambdas changes loss_mix (each view has its own lam)."""
    x_a, x_b = views()
    results = []
    for lams in [(torch.tensor([0.1, 0.9]), torch.tensor([0.6, 0.4])),
                 (torch.tensor([0.6, 0.4]), torch.tensor([0.1, 0.9]))]:
        model = build(MixCoSimCLR).eval()
        model.mixer = FixedMixer(lams)
        results.append(model([x_a, x_b], mode='loss')['loss_mix'].item())
    assert abs(results[0] - results[1]) > 1e-4


def test_mixco_simclr_gradient_flows_into_targets():
    """Targets keep their gradient: d loss_mix / d x_b (only via z_b) equals the naive one."""
    lams = (torch.tensor([0.25, 0.6]), torch.tensor([0.9, 0.4]))
    model = build(MixCoSimCLR, mix_temperature=0.5).eval()
    model.mixer = FixedMixer(lams)  # mixed images built from detached views
    x_a, x_b = views()
    x_b.requires_grad_()
    (grad,) = torch.autograd.grad(model([x_a, x_b], mode='loss')['loss_mix'], x_b)
    x_b_ref = x_b.detach().clone().requires_grad_()
    _, want_mix = naive_mixco_simclr(model, x_a, x_b_ref, lams, (None, None), 0.5, 0.5, 1.0)
    (want,) = torch.autograd.grad(want_mix, x_b_ref)
    assert grad.abs().max() > 1e-6  # zero if z_b were detached
    torch.testing.assert_close(grad, want, rtol=1e-6, atol=1e-9)


def test_mixco_loss_gives_targets_a_gradient():
    """MixCoLoss on leaf tensors: the keys (the other view's projections) get a gradient."""
    torch.manual_seed(2)
    zm_a = F.normalize(torch.randn(3, 8, dtype=torch.float64), dim=1).requires_grad_()
    z_b = F.normalize(torch.randn(6, 8, dtype=torch.float64), dim=1).requires_grad_()
    MixCoLoss(0.5)(zm_a, z_b, torch.rand(3, dtype=torch.float64)).backward()
    assert z_b.grad is not None and z_b.grad.abs().max() > 1e-6


def test_mixco_simclr_default_step_is_finite():
    """With the real Mixer, a training-mode step gives finite losses and a gradient."""
    torch.manual_seed(3)
    model = build(MixCoSimCLR)
    losses = model(views(), mode='loss')
    assert all(torch.isfinite(v).all() for v in losses.values())
    (losses['loss_inst'] + losses['loss_mix']).backward()
    assert all(p.grad is not None for p in model.projection_head.parameters())
