"""i-Mix on MoCo (methods/imix.py) against naive float64 loops written apart from it."""
import copy
import inspect
import math

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import MODELS

import methods  # noqa: F401  (registers the models)
from benchmark.engine.compat import parse_cfg_option
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import merge_options
from benchmark.engine.launch import load_config
from methods.imix import IMixMoCo, imix_inputs, imix_loss
from tests.conftest import ROOT

BACKBONE = dict(depth=18, small_stem=True)


# ----------------------------------------------------------------------------- naive references
def naive_mix(x, lam, partner):
    """Row i = lam_i x_i + (1 - lam_i) x_{partner_i}, one row at a time."""
    return torch.stack([float(lam[i]) * x[i] + (1 - float(lam[i])) * x[int(partner[i])]
                        for i in range(x.shape[0])])


def naive_imix(q_mix, keys, queue, lam, partner, tau):
    """(loss, d loss / d q_mix) of i-Mix: per row a softmax over [B keys, K queue] with targets
    lam on the own key and 1 - lam on the partner's; gradient (p - t) . columns / (tau B)."""
    b = q_mix.shape[0]
    columns = [keys[j] for j in range(b)] + [queue[j] for j in range(queue.shape[0])]
    loss, grad = 0.0, torch.zeros_like(q_mix)
    for i in range(b):
        logits = [float((q_mix[i] * c).sum()) / tau for c in columns]
        top = max(logits)
        z = sum(math.exp(v - top) for v in logits)
        p = [math.exp(v - top) / z for v in logits]
        t = [0.0] * len(columns)
        t[i] += float(lam[i])
        t[int(partner[i])] += 1 - float(lam[i])
        loss -= sum(t[j] * math.log(p[j]) for j in range(len(columns))) / b
        for j, c in enumerate(columns):
            grad[i] += (p[j] - t[j]) * c / (tau * b)
    return loss, grad


def build(queue_size=10, seed=0, **kwargs):
    torch.manual_seed(seed)
    return IMixMoCo(backbone=BACKBONE, feature_dim=16, queue_size=queue_size, **kwargs).double()


def views(b=4, seed=1, size=8):
    torch.manual_seed(seed)
    return [torch.randn(b, 3, size, size, dtype=torch.float64) for _ in range(2)]


def unit_rows(*shape):
    return F.normalize(torch.randn(*shape, dtype=torch.float64), dim=-1)


LAM = torch.tensor([0.5, 0.8, 1.0, 0.63, 0.97], dtype=torch.float64)
PARTNER = torch.tensor([3, 1, 4, 0, 2])  # row 1 is its own partner


# ----------------------------------------------------------------------------- pure functions
def test_imix_inputs_match_naive_loop():
    torch.manual_seed(0)
    x = torch.randn(5, 3, 4, 4, dtype=torch.float64)
    got = imix_inputs(x, LAM, PARTNER)
    assert torch.allclose(got, naive_mix(x, LAM, PARTNER), atol=1e-12, rtol=0)


@pytest.mark.parametrize('tau', (0.1, 0.2, 1.0))
def test_imix_loss_and_gradient_match_naive_reference(tau):
    """Loss and d loss / d q_mix to 1e-6; the queue and the in-batch keys are both columns."""
    torch.manual_seed(1)
    q_mix = unit_rows(5, 6).requires_grad_()
    keys, queue = unit_rows(5, 6), unit_rows(7, 6)
    loss, _ = imix_loss(q_mix, keys, queue, LAM, PARTNER, tau)
    loss.backward()
    want, want_grad = naive_imix(q_mix.detach(), keys, queue, LAM, PARTNER, tau)
    assert abs(loss.item() - want) < 1e-6
    assert torch.allclose(q_mix.grad, want_grad, atol=1e-6, rtol=0)
    # the partner's share matters: the check above tells partners apart
    other, _ = naive_imix(q_mix.detach(), keys, queue, LAM, PARTNER.roll(1), tau)
    assert abs(other - want) > 1e-3


def test_imix_accuracy_on_constructed_case():
    """acc counts rows whose arg-max is the key holding the larger share (2 of 3 here)."""
    keys = torch.eye(3, dtype=torch.float64)
    q_mix = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [0, 0, 1.0]], dtype=torch.float64)
    lam = torch.tensor([0.9, 0.6, 0.7], dtype=torch.float64)
    partner = torch.tensor([1, 2, 0])  # row 1 points at key 0, but its major key is 1
    _, acc = imix_loss(q_mix, keys, keys[:0], lam, partner, 0.2)
    assert acc.item() == pytest.approx(2 / 3)


# ----------------------------------------------------------------------------- model
def test_model_loss_matches_naive_reference_on_its_embeddings(monkeypatch):
    """With lam and partner pinned, loss_mix = naive i-Mix on the model's own q_mix, keys and
    the pre-step queue; no instance loss; the keys (unpermuted) are what gets enqueued."""
    model = build(queue_size=10).eval()
    model.queue_ptr.fill_(8)
    monkeypatch.setattr(model, 'sample_mix', lambda x: (LAM.to(x.dtype), PARTNER))
    reference = copy.deepcopy(model)
    x_q, x_k = views(b=5)
    losses = model([x_q, x_k], mode='loss')
    q_mix = reference.embed_query(naive_mix(x_q, LAM, PARTNER))
    k = reference.embed_keys(x_k)
    want, _ = naive_imix(q_mix.detach(), k, reference.queue, LAM, PARTNER, 0.2)
    assert set(losses) == {'loss_mix', 'acc_mix', 'lam_mean'}
    assert abs(losses['loss_mix'].item() - want) < 1e-6
    assert losses['lam_mean'].item() == pytest.approx(LAM.mean().item())
    assert torch.allclose(model.queue[[8, 9, 0, 1, 2]], k, atol=1e-12)
    post_step, _ = naive_imix(q_mix.detach(), k, model.queue, LAM, PARTNER, 0.2)
    assert abs(post_step - want) > 1e-3  # the old and the new queue are told apart


def test_sample_mix_draws_per_sample_folded_lambdas_and_a_permutation():
    model = build()
    x = torch.zeros(64, 3, 2, 2)
    torch.manual_seed(0)
    lam, partner = model.sample_mix(x)
    assert lam.shape == (64,) and sorted(partner.tolist()) == list(range(64))
    assert (lam >= 0.5).all() and (lam <= 1).all() and lam.unique().numel() == 64
    torch.manual_seed(0)
    again = model.sample_mix(x)
    assert torch.equal(again[0], lam) and torch.equal(again[1], partner)  # global RNG only
    model.mix_lambda_fold = False
    assert (model.sample_mix(x)[0] < 0.5).any()
    model.mix_lambda_scope = 'batch'
    assert model.sample_mix(x)[0].unique().numel() == 1


def test_defaults_are_the_papers():
    """alpha = 1 (the code's default and CIFAR runs), one lambda per sample folded to >= 0.5
    (builder.py `mixup`), tau = 0.2 of MoCo-v2 (their MoCo runs' --temp 0.2)."""
    params = inspect.signature(IMixMoCo.__init__).parameters
    assert params['mix_alpha'].default == 1.0
    assert params['mix_lambda_scope'].default == 'pair'
    assert params['mix_lambda_fold'].default is True
    model = build()
    assert model.temperature == 0.2
    with pytest.raises(ValueError):
        build(mix_alpha=0.0)
    with pytest.raises(ValueError):
        build(mix_lambda_scope='sample')


def test_training_step_on_tiny_resnet18():
    """One SGD step at 32 px, batch 8, queue 32: finite loss, the query encoder moves, the key
    encoder gets no gradient, the 8 keys are enqueued."""
    torch.manual_seed(0)
    model = IMixMoCo(backbone=dict(depth=18, small_stem=False), queue_size=32).train()
    before = [p.detach().clone() for p in model.backbone.parameters()]
    queue_before = model.queue.clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = model([torch.randn(8, 3, 32, 32), torch.randn(8, 3, 32, 32)], mode='loss')
    sum(v for n, v in losses.items() if 'loss' in n).backward()
    optimizer.step()
    assert all(torch.isfinite(v).all() for v in losses.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, model.backbone.parameters()))
    assert all(p.grad is None for p in model.momentum_parameters())
    assert int(model.queue_ptr) == 8 and torch.equal(model.queue[8:], queue_before[8:])
    assert not torch.equal(model.queue[:8], queue_before[:8])


# ----------------------------------------------------------------------------- configs
@pytest.mark.parametrize('name, base', [('imix_r18_tiny.py', 'mocov2_r18_tiny.py'),
                                        ('imix_r18_digits.py', 'mocov2_r18_digits.py')])
def test_config_validates_builds_and_differs_only_in_method_fields(name, base):
    cfg = load_config(str(ROOT / 'configs' / name))  # the views' size filled, as train.py does
    validate_config(cfg)
    cfg.model.queue_size = 256
    assert isinstance(MODELS.build(cfg.model), IMixMoCo)
    a = Config.fromfile(str(ROOT / 'configs' / name)).to_dict()
    b = Config.fromfile(str(ROOT / 'configs' / base)).to_dict()
    model_a, model_b = a.pop('model'), b.pop('model')
    assert a == b
    changed = {k for k in model_a if k not in model_b or model_a[k] != model_b[k]}
    assert changed == {'type', 'mix_alpha', 'mix_lambda_scope', 'mix_lambda_fold'}
    assert model_a['type'] == 'IMixMoCo'


@pytest.mark.parametrize('option, words', [('model.mix_lambda_scope=sample',
                                            "not in ('pair', 'batch')"),
                                           ('model.mix_alpha=0', '> 0'),
                                           ('model.mix_lambda_fold=maybe', 'True or False')])
def test_config_check_rejects_bad_values(option, words):
    cfg = Config.fromfile(str(ROOT / 'configs/imix_r18_tiny.py'))
    key, value = option.split('=', 1)
    merge_options(cfg, {key: parse_cfg_option(value)})
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert key in str(err.value) and words in str(err.value), str(err.value)
