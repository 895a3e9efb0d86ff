"""MoCHi on MoCo (methods/mochi.py) against naive float64 loops written apart from it."""
import copy
import inspect
import math

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.logging import MessageHub
from mmengine.registry import MODELS

import methods  # noqa: F401  (registers the models)
import methods.mochi as mochi
from benchmark.engine.compat import parse_cfg_option
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import merge_options
from benchmark.engine.launch import load_config
from methods.mochi import (MoCHiMoCo, hardest_negatives, mochi_info_nce,
                           synthesize_negatives)
from tests.conftest import ROOT

BACKBONE = dict(depth=18, small_stem=True)


# ----------------------------------------------------------------------------- naive references
def dot(u, v):
    return float((u * v).sum())


def unit(v):
    return v / math.sqrt(dot(v, v))


def naive_hardest(q_i, queue, n):
    """Queue indices sorted by similarity to q_i, most similar first, the first n of them."""
    return sorted(range(queue.shape[0]), key=lambda j: -dot(q_i, queue[j]))[:n]


def naive_synthetic(q_i, hard, pairs, alphas, picks, betas):
    """Paper sec. 4.1 and 4.2 for one query: mixes of two hard negatives, then mixes of the
    query with one, each L2-normalised."""
    out = [unit(float(a) * hard[int(p[0])] + (1 - float(a)) * hard[int(p[1])])
           for p, a in zip(pairs, alphas)]
    out += [unit(float(b) * q_i + (1 - float(b)) * hard[int(j)]) for j, b in zip(picks, betas)]
    return out


def naive_mochi(q, k, queue, n, draws, tau):
    """(loss, d loss / d q): per row a softmax over [k_i, queue, that row's synthetic
    negatives] with the positive first; synthetic points are constants, so the gradient of row
    i is (p - e_0) . columns / (tau B)."""
    pair_idx, alpha, query_idx, beta = draws
    b = q.shape[0]
    loss, grad = 0.0, torch.zeros_like(q)
    for i in range(b):
        hard = [queue[j] for j in naive_hardest(q[i], queue, n)]
        columns = [k[i]] + [queue[j] for j in range(queue.shape[0])]
        columns += naive_synthetic(q[i], hard, pair_idx[i], alpha[i], query_idx[i], beta[i])
        logits = [dot(q[i], c) / tau for c in columns]
        top = max(logits)
        z = sum(math.exp(v - top) for v in logits)
        p = [math.exp(v - top) / z for v in logits]
        loss -= math.log(p[0]) / b
        for j, c in enumerate(columns):
            grad[i] += (p[j] - (j == 0)) * c / (tau * b)
    return loss, grad


def draws(b, n, s, s_query, seed=3):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(n, (b, s, 2), generator=g),
            torch.rand(b, s, generator=g, dtype=torch.float64),
            torch.randint(n, (b, s_query), generator=g),
            0.5 * torch.rand(b, s_query, generator=g, dtype=torch.float64))


def build(queue_size=10, seed=0, **kwargs):
    torch.manual_seed(seed)
    return MoCHiMoCo(backbone=BACKBONE, feature_dim=16, queue_size=queue_size, **kwargs).double()


def views(b=4, seed=1, size=8):
    torch.manual_seed(seed)
    return [torch.randn(b, 3, size, size, dtype=torch.float64) for _ in range(2)]


def unit_rows(*shape):
    return F.normalize(torch.randn(*shape, dtype=torch.float64), dim=-1)


@pytest.fixture
def epoch():
    """Set the epoch mmengine's runner would publish; restore the hub afterwards."""
    hub = MessageHub.get_current_instance()
    old = hub.runtime_info.get('epoch')
    yield lambda value: hub.update_info('epoch', value)
    if old is None:
        hub.runtime_info.pop('epoch', None)
    else:
        hub.update_info('epoch', old)


# ----------------------------------------------------------------------------- pure functions
def test_hardest_negatives_are_the_most_similar_in_order():
    torch.manual_seed(0)
    q, queue = unit_rows(4, 6), unit_rows(12, 6)
    got = hardest_negatives(q, queue, 5)
    for i in range(4):
        want = torch.stack([queue[j] for j in naive_hardest(q[i], queue, 5)])
        assert torch.equal(got[i], want)


def test_synthetic_negatives_match_naive_loop():
    torch.manual_seed(1)
    q, hard = unit_rows(3, 6), unit_rows(3, 5, 6)
    pair_idx, alpha, query_idx, beta = draws(3, 5, 4, 2)
    got = synthesize_negatives(q.requires_grad_(), hard, pair_idx, alpha, query_idx, beta)
    assert got.shape == (3, 6, 6) and not got.requires_grad
    for i in range(3):
        want = naive_synthetic(q[i].detach(), hard[i], pair_idx[i], alpha[i], query_idx[i], beta[i])
        assert torch.allclose(got[i], torch.stack(want), atol=1e-12, rtol=0)


@pytest.mark.parametrize('n, s, s_query, tau', [(5, 4, 2, 0.2), (12, 6, 0, 0.07), (3, 0, 5, 1.0)])
def test_mochi_loss_and_gradient_match_naive_reference(n, s, s_query, tau):
    """hardest -> synthesise -> InfoNCE: value and d loss / d q to 1e-6 (the synthetic points,
    the query-mixed ones included, are constants)."""
    torch.manual_seed(2)
    q = unit_rows(4, 6).requires_grad_()
    k, queue = unit_rows(4, 6), unit_rows(12, 6)
    pinned = draws(4, n, s, s_query)
    synthetic = synthesize_negatives(q, hardest_negatives(q, queue, n), *pinned)
    loss, _ = mochi_info_nce(q, k, queue, synthetic, tau)
    loss.backward()
    want, want_grad = naive_mochi(q.detach(), k, queue, n, pinned, tau)
    assert abs(loss.item() - want) < 1e-6
    assert torch.allclose(q.grad, want_grad, atol=1e-6, rtol=0)
    plain, _ = naive_mochi(q.detach(), k, queue, n, draws(4, n, 0, 0), tau)
    assert abs(plain - want) > 1e-3  # the synthetic negatives are seen by the check above


# ----------------------------------------------------------------------------- model
def test_model_loss_matches_naive_reference_and_clamps_n_to_the_queue(monkeypatch, epoch):
    """N = 1024 > K = 10: the draws index the 10 hardest; loss_inst equals the naive MoCHi
    loss on the model's own q, k and the pre-step queue."""
    epoch(0)
    model = build(queue_size=10, mix_warmup_epochs=0, mix_synthetic=6, mix_query_synthetic=3).eval()
    model.queue_ptr.fill_(8)
    pinned = draws(4, 10, 6, 3)
    seen = []

    def fixed(b, n, device):
        seen.append((b, n))
        return pinned

    monkeypatch.setattr(model, 'sample_synthesis', fixed)
    reference = copy.deepcopy(model)
    x_q, x_k = views(b=4)
    losses = model([x_q, x_k], mode='loss')
    q, k = reference.embed_query(x_q).detach(), reference.embed_keys(x_k)
    want, _ = naive_mochi(q, k, reference.queue, 10, pinned, 0.2)
    assert seen == [(4, 10)] and set(losses) == {'loss_inst', 'acc_inst', 'mix_active'}
    assert abs(losses['loss_inst'].item() - want) < 1e-6 and losses['mix_active'].item() == 1
    assert torch.allclose(model.queue[[8, 9, 0, 1]], k, atol=1e-12)


def test_warm_up_is_plain_moco_until_the_epoch(epoch):
    """Before epoch mix_warmup_epochs the loss is plain InfoNCE; from it on, mixing starts."""
    model = build(mix_warmup_epochs=3).eval()
    x_q, x_k = views()
    epoch(2)
    reference = copy.deepcopy(model)
    losses = model([x_q, x_k], mode='loss')
    q, k = reference.embed_query(x_q).detach(), reference.embed_keys(x_k)
    want, _ = naive_mochi(q, k, reference.queue, 1, draws(4, 1, 0, 0), 0.2)
    assert losses['mix_active'].item() == 0 and abs(losses['loss_inst'].item() - want) < 1e-6
    epoch(3)
    assert model([x_q, x_k], mode='loss')['mix_active'].item() == 1


def test_sample_synthesis_shapes_and_ranges():
    model = build()
    torch.manual_seed(0)
    pair_idx, alpha, query_idx, beta = model.sample_synthesis(64, 7, torch.device('cpu'))
    assert pair_idx.shape == (64, 1024, 2) and alpha.shape == (64, 1024)
    assert query_idx.shape == beta.shape == (64, 512)
    assert pair_idx.min() == 0 and pair_idx.max() == 6 and query_idx.max() == 6
    assert 0 <= alpha.min() and alpha.max() < 1 and alpha.max() > 0.99
    assert 0 <= beta.min() and beta.max() < 0.5 and beta.max() > 0.49


def test_defaults_are_the_documented_ones():
    """The paper's mixing: beta ~ U(0, 0.5) on the query (sec. 4.2), tau of MoCo-v2, its
    ImageNet-100 warm-up of 10 epochs (sec. 5); the sizes (N, s, s') = (1024, 1024, 512) at
    K = 65536 as the method's NOTE and docs/methods.md give them (chosen for the Tiny-ImageNet
    setting, not a paper row). test_mochi_sources.py checks each against the paper's text."""
    params = inspect.signature(MoCHiMoCo.__init__).parameters
    assert params['mix_hardest'].default == 1024
    assert params['mix_synthetic'].default == 1024
    assert params['mix_query_synthetic'].default == 512
    assert params['mix_warmup_epochs'].default == 10
    assert mochi.QUERY_SHARE_MAX == 0.5 and build().temperature == 0.2
    for bad in (dict(mix_hardest=0), dict(mix_synthetic=-1), dict(mix_query_synthetic=-1),
                dict(mix_warmup_epochs=-1)):
        with pytest.raises(ValueError):
            build(**bad)


def test_training_step_queue_holds_only_real_keys(monkeypatch, epoch):
    """One SGD step at 32 px, batch 8, queue 32 with the default (N, s, s'): 1,536 synthetic
    negatives per query are made, yet the queue keeps 32 rows: the 8 at the pointer are the key
    encoder's outputs of this step, the rest is untouched."""
    epoch(0)
    torch.manual_seed(0)
    model = MoCHiMoCo(backbone=dict(depth=18, small_stem=False), queue_size=32,
                      mix_warmup_epochs=0).train()
    made, keys = [], []
    synthesize, embed_keys = mochi.synthesize_negatives, model.embed_keys
    monkeypatch.setattr(mochi, 'synthesize_negatives',
                        lambda *a: made.append(synthesize(*a)) or made[-1])
    monkeypatch.setattr(model, 'embed_keys', lambda x: keys.append(embed_keys(x)) or keys[-1])
    queue_before = model.queue.clone()
    before = [p.detach().clone() for p in model.backbone.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = model([torch.randn(8, 3, 32, 32), torch.randn(8, 3, 32, 32)], mode='loss')
    losses['loss_inst'].backward()
    optimizer.step()
    assert losses['mix_active'].item() == 1 and torch.isfinite(losses['loss_inst'])
    assert len(made) == 1 and made[0].shape == (8, 1024 + 512, 128)
    assert int(model.queue_ptr) == 8 and model.queue.shape == (32, 128)
    assert torch.equal(model.queue[:8], keys[0]) and torch.equal(model.queue[8:], queue_before[8:])
    assert any(not torch.equal(a, b) for a, b in zip(before, model.backbone.parameters()))


# ----------------------------------------------------------------------------- configs
@pytest.mark.parametrize('name, base', [('mochi_r18_tiny.py', 'mocov2_r18_tiny.py'),
                                        ('mochi_r18_digits.py', 'mocov2_r18_digits.py')])
def test_config_validates_builds_and_differs_only_in_method_fields(name, base):
    cfg = load_config(str(ROOT / 'configs' / name))  # the views' size filled, as train.py does
    validate_config(cfg)
    cfg.model.queue_size = 256
    assert isinstance(MODELS.build(cfg.model), MoCHiMoCo)
    a = Config.fromfile(str(ROOT / 'configs' / name)).to_dict()
    b = Config.fromfile(str(ROOT / 'configs' / base)).to_dict()
    model_a, model_b = a.pop('model'), b.pop('model')
    assert a == b
    changed = {k for k in model_a if k not in model_b or model_a[k] != model_b[k]}
    assert changed == {'type', 'mix_hardest', 'mix_synthetic', 'mix_query_synthetic',
                       'mix_warmup_epochs'}
    assert model_a['type'] == 'MoCHiMoCo' and model_a['mix_hardest'] <= model_a['queue_size']


@pytest.mark.parametrize('option, words', [('model.mix_hardest=0', '>= 1'),
                                           ('model.mix_synthetic=-1', '>= 0'),
                                           ('model.mix_query_synthetic=1.5', 'integer'),
                                           ('model.mix_warmup_epochs=-2', '>= 0')])
def test_config_check_rejects_bad_values(option, words):
    cfg = Config.fromfile(str(ROOT / 'configs/mochi_r18_tiny.py'))
    key, value = option.split('=', 1)
    merge_options(cfg, {key: parse_cfg_option(value)})
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert key in str(err.value) and words in str(err.value), str(err.value)
