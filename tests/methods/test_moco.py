"""MoCo-v2 and MixCo on MoCo (methods/moco.py, methods/mixco_moco.py) vs naive float64 loops."""
import copy
import math

import pytest
import torch
import torch.nn.functional as F

from methods.mixco_moco import MixCoMoCo
from methods.moco import MoCo, info_nce

BACKBONE = dict(depth=18, small_stem=True)


# ----------------------------------------------------------------------------- naive references
def dot(u, v):
    return sum(u[d] * v[d] for d in range(u.shape[0]))


def naive_info_nce(q, k, queue, tau):
    """Mean over rows of -log(e^{q_i.k_i/tau} / (e^{q_i.k_i/tau} + sum_j e^{q_i.queue_j/tau}))."""
    total = 0.0
    for i in range(q.shape[0]):
        pos = math.exp(dot(q[i], k[i]).item() / tau)
        neg = sum(math.exp(dot(q[i], row).item() / tau) for row in queue)
        total -= math.log(pos / (pos + neg))
    return total / q.shape[0]


def naive_mix_loss(q_mix, keys, lam, negatives, tau):
    """Paper eq. 3, mean over M rows: softmax over [2M keys, negatives], targets lam / 1 - lam."""
    m = q_mix.shape[0]
    total = 0.0
    for i in range(m):
        logits = [dot(q_mix[i], keys[j]).item() / tau for j in range(2 * m)]
        logits += [dot(q_mix[i], row).item() / tau for row in negatives]
        log_z = math.log(sum(math.exp(v) for v in logits))
        lam_i = float(lam[i])
        total -= lam_i * (logits[i] - log_z) + (1 - lam_i) * (logits[m + i] - log_z)
    return total / m


def naive_mix(x, lam, order=None):
    """x_mix[i] = lam_i x[order[i]] + (1 - lam_i) x[order[M + i]] (order = identity by default)."""
    m = x.shape[0] // 2
    order = list(range(2 * m)) if order is None else order.tolist()
    return torch.stack([lam[i] * x[order[i]] + (1 - lam[i]) * x[order[m + i]] for i in range(m)])


class FixedMixer:
    """Stands in for the model's Mixer: fixed lam (and order), mixing done by the naive loop."""

    def __init__(self, lam, order=None):
        self.lam, self.order, self.calls = lam, order, 0

    def __call__(self, x):
        self.calls += 1
        lam = self.lam.to(x.dtype)
        return naive_mix(x, lam, self.order), lam, self.order


def build(cls=MoCo, queue_size=16, seed=0, **kwargs):
    """A tiny float64 model (ResNet-18, small stem) with a 16-d head."""
    torch.manual_seed(seed)
    return cls(backbone=BACKBONE, feature_dim=16, queue_size=queue_size, **kwargs).double()


def views(b=4, seed=1):
    torch.manual_seed(seed)
    return [torch.randn(b, 3, 8, 8, dtype=torch.float64) for _ in range(2)]


def unit_rows(*shape):
    return F.normalize(torch.randn(*shape, dtype=torch.float64), dim=-1)


# ----------------------------------------------------------------------------- info_nce
@pytest.mark.parametrize('tau', (0.07, 0.2, 1.0))
def test_info_nce_matches_naive_loop(tau):
    """info_nce's loss equals the naive InfoNCE loop."""
    torch.manual_seed(0)
    q, k, queue = unit_rows(5, 6), unit_rows(5, 6), unit_rows(7, 6)
    loss, _ = info_nce(q, k, queue, tau)
    assert abs(loss.item() - naive_info_nce(q, k, queue, tau)) < 1e-9


def test_info_nce_accuracy_on_constructed_case():
    """acc is the share of rows whose positive beats every queue entry (3 of 4 here)."""
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]])
    k = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
    queue = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])  # row 1: the queue's [0, 1] beats its positive
    _, acc = info_nce(q, k, queue, 0.2)
    assert acc.item() == pytest.approx(0.75)


# ----------------------------------------------------------------------------- queue
def test_enqueue_order_and_wrap_around():
    """K = 10, three batches of 4: rows land at the pointer, wrap around, pointer 4 -> 8 -> 2."""
    model = build(queue_size=10)
    batches = [unit_rows(4, 16) for _ in range(3)]
    pointers = []
    for keys in batches:
        model.enqueue(keys)
        pointers.append(int(model.queue_ptr))
    assert pointers == [4, 8, 2]
    want = torch.cat([batches[2][2:], batches[0][2:], batches[1], batches[2][:2]])
    assert torch.equal(model.queue, want)


def test_enqueue_more_keys_than_queue_raises():
    """Enqueueing more keys than K raises ValueError."""
    model = build(queue_size=3)
    with pytest.raises(ValueError):
        model.enqueue(unit_rows(4, 16))


def test_queue_is_a_persistent_buffer():
    """queue and queue_ptr are in the state dict (checkpoints carry them)."""
    state = build(queue_size=10).state_dict()
    assert state['queue'].shape == (10, 16) and 'queue_ptr' in state


# ----------------------------------------------------------------------------- key encoder
def test_key_momentum_update():
    """After one embed_keys, every key parameter is 0.999 * old_key + 0.001 * query."""
    model = build()
    with torch.no_grad():
        for param in [*model.backbone.parameters(), *model.projection_head.parameters()]:
            param.add_(torch.randn_like(param))  # make query and key encoders differ
    query = [p.detach().clone() for p in [*model.backbone.parameters(),
                                          *model.projection_head.parameters()]]
    old_key = [p.detach().clone() for p in model.momentum_parameters()]
    model.embed_keys(views()[1])
    new_key = model.momentum_parameters()
    assert len(new_key) == len(query) == len(old_key)
    for new, old, q in zip(new_key, old_key, query):
        torch.testing.assert_close(new, 0.999 * old + 0.001 * q, rtol=0, atol=1e-12)


def test_keys_get_no_gradient():
    """Keys do not require grad; after backward the key encoder has no .grad, the query has."""
    model = build()
    x_q, x_k = views()
    assert not model.embed_keys(x_k).requires_grad
    losses = model(views(), mode='loss')
    losses['loss_inst'].backward()
    for param in model.momentum_parameters():
        assert not param.requires_grad and param.grad is None
    assert all(p.grad is not None for p in model.backbone.parameters())


def test_moco_loss_matches_naive_info_nce():
    """MoCo's loss_inst equals naive InfoNCE on its own q, keys and the pre-step queue."""
    model = build().eval()
    reference = copy.deepcopy(model)
    x_q, x_k = views()
    losses = model([x_q, x_k], mode='loss')
    q, k = reference.embed_query(x_q), reference.embed_keys(x_k)
    want = naive_info_nce(q, k, reference.queue, model.temperature)
    assert set(losses) == {'loss_inst', 'acc_inst'}
    assert abs(losses['loss_inst'].item() - want) < 1e-6


# ----------------------------------------------------------------------------- MixCoMoCo
def spy_step(model, monkeypatch):
    """Record the queue passed to contrast, the keys it returned and how often enqueue ran."""
    record = dict(contrast=0, enqueue=0)
    contrast, enqueue = model.contrast, model.enqueue

    def contrast_spy(x_q, x_k, queue):
        record['contrast'] += 1
        record['queue'] = queue.clone()
        losses, keys = contrast(x_q, x_k, queue)
        record['keys'] = keys.clone()
        return losses, keys

    def enqueue_spy(keys):
        record['enqueue'] += 1
        enqueue(keys)

    monkeypatch.setattr(model, 'contrast', contrast_spy)
    monkeypatch.setattr(model, 'enqueue', enqueue_spy)
    return record


def test_mixco_moco_reads_one_queue_snapshot_and_enqueues_once(monkeypatch):
    """One contrast on the pre-step queue, one enqueue of B rows at the pointer (wrapping)."""
    model = build(MixCoMoCo, queue_size=10)
    model.queue_ptr.fill_(8)
    before = model.queue.clone()
    record = spy_step(model, monkeypatch)
    losses = model(views(b=4), mode='loss')
    assert record['contrast'] == 1 and record['enqueue'] == 1
    assert torch.equal(record['queue'], before)
    changed = [8, 9, 0, 1]
    unchanged = [i for i in range(10) if i not in changed]
    assert torch.equal(model.queue[changed], record['keys'].to(model.queue.dtype))
    assert torch.equal(model.queue[unchanged], before[unchanged])
    assert int(model.queue_ptr) == 2
    # backward still works: enqueue did not write into the tensors the losses were built from
    sum(v for n, v in losses.items() if 'loss' in n).backward()


@pytest.mark.parametrize('order', [None, torch.tensor([3, 0, 5, 1, 4, 2])])
def test_mixco_moco_losses_match_naive_reference(order):
    """loss_inst, loss_mix equal naive InfoNCE and eq. 3 on the model's embeddings and old queue."""
    lam = torch.tensor([0.0, 0.35, 1.0])
    model = build(MixCoMoCo, queue_size=10, mix_weight=1.0).eval()
    model.queue_ptr.fill_(8)
    model.mixer = FixedMixer(lam, order)
    reference = copy.deepcopy(model)
    x_q, x_k = views(b=6)
    losses = model([x_q, x_k], mode='loss')
    assert model.mixer.calls == 1
    q = reference.embed_query(x_q)
    q_mix = reference.embed_query(naive_mix(x_q, lam.double(), order))
    k = reference.embed_keys(x_k)
    keys = k if order is None else k[order]
    want_mix = naive_mix_loss(q_mix, keys, lam, reference.queue, 0.05)
    assert abs(losses['loss_inst'].item() - naive_info_nce(q, k, reference.queue, 0.2)) < 1e-6
    assert abs(losses['loss_mix'].item() - want_mix) < 1e-6
    post_step = naive_mix_loss(q_mix, keys, lam, model.queue, 0.05)
    assert abs(post_step - want_mix) > 1e-3  # the check above tells the two queues apart


def test_mixco_moco_loss_dict():
    """Keys loss_inst, loss_mix, acc_inst, lam_mean; all finite; lam_mean in [0, 1]."""
    model = build(MixCoMoCo)
    losses = model(views(), mode='loss')
    assert set(losses) == {'loss_inst', 'loss_mix', 'acc_inst', 'lam_mean'}
    assert all(torch.isfinite(v).all() for v in losses.values())
    assert 0 <= losses['lam_mean'].item() <= 1 and losses['loss_mix'].item() > 0


def run_step(model, seed=5):
    torch.manual_seed(seed)
    return model(views(), mode='loss')


def test_mixco_moco_mix_weight_scales_loss_mix():
    """loss_mix = mix_weight * unweighted L_mix; mix_weight = 0 gives 0; loss_inst unchanged."""
    base = build(MixCoMoCo, mix_weight=1.0).eval()
    results = {}
    for weight in (0.0, 1.0, 2.5):
        model = copy.deepcopy(base)
        model.mix_weight = weight
        results[weight] = run_step(model)
    assert results[0.0]['loss_mix'].item() == 0
    assert results[1.0]['loss_mix'].item() > 0
    assert abs(results[2.5]['loss_mix'].item() - 2.5 * results[1.0]['loss_mix'].item()) < 1e-9
    assert results[2.5]['loss_inst'].item() == pytest.approx(results[1.0]['loss_inst'].item(),
                                                             abs=1e-12)


def test_mixco_moco_mix_weight_option():
    """The mix_weight constructor argument is the weight used, and negative weights raise."""
    torch.manual_seed(0)
    model = build(MixCoMoCo, mix_weight=0.0).eval()
    assert run_step(model)['loss_mix'].item() == 0
    with pytest.raises(ValueError):
        build(MixCoMoCo, mix_weight=-1.0)


def test_mixco_moco_joint_and_separate_forward_agree_in_eval():
    """In eval mode (BN running stats) joint and separate forwards give the same losses."""
    joint = build(MixCoMoCo, mix_joint_forward=True).eval()
    separate = build(MixCoMoCo, mix_joint_forward=False).eval()
    a, b = run_step(joint), run_step(separate)
    for name in ('loss_inst', 'loss_mix', 'lam_mean'):
        assert abs(a[name].item() - b[name].item()) < 1e-5


def test_mixco_moco_joint_forward_shares_bn_statistics_in_train():
    """In train mode the joint forward's BN sees 1.5 B samples, so loss_inst differs."""
    joint = build(MixCoMoCo, mix_joint_forward=True).train()
    separate = build(MixCoMoCo, mix_joint_forward=False).train()
    a, b = run_step(joint), run_step(separate)
    assert all(torch.isfinite(v).all() for v in [*a.values(), *b.values()])
    assert abs(a['loss_inst'].item() - b['loss_inst'].item()) > 1e-6
