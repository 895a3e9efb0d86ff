"""Un-Mix on MoCo (methods/unmix.py) against naive float64 loops written apart from it."""
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
from methods.unmix import UnMixMoCo, cutmix_box, unmix_global, unmix_loss, unmix_region
from tests.conftest import ROOT

BACKBONE = dict(depth=18, small_stem=True)


# ----------------------------------------------------------------------------- naive references
def naive_global(x, lam):
    b = x.shape[0]
    return torch.stack([lam * x[i] + (1 - lam) * x[b - 1 - i] for i in range(b)])


def naive_region(x, y1, y2, x1, x2):
    """Pixel by pixel: inside the box the reversed batch's pixel, outside the own one."""
    b, _, h, w = x.shape
    out = torch.empty_like(x)
    own = 0
    for i in range(b):
        for r in range(h):
            for c in range(w):
                inside = y1 <= r < y2 and x1 <= c < x2
                out[i, :, r, c] = x[b - 1 - i, :, r, c] if inside else x[i, :, r, c]
                own += (not inside) and i == 0
    return out, own / (h * w)


def naive_info_nce_terms(q, positives, queue, tau):
    """(loss, d loss / d q) of InfoNCE, one row at a time: columns [positive_i, queue]."""
    b = q.shape[0]
    loss, grad = 0.0, torch.zeros_like(q)
    for i in range(b):
        columns = [positives[i]] + [queue[j] for j in range(queue.shape[0])]
        logits = [float((q[i] * c).sum()) / tau for c in columns]
        top = max(logits)
        z = sum(math.exp(v - top) for v in logits)
        p = [math.exp(v - top) / z for v in logits]
        loss -= math.log(p[0]) / b
        for j, c in enumerate(columns):
            grad[i] += (p[j] - (j == 0)) * c / (tau * b)
    return loss, grad


def naive_unmix(q_mix, k, queue, lam, tau):
    """lam * InfoNCE(row i vs key i) + (1 - lam) * InfoNCE(row i vs key B - 1 - i)."""
    b = k.shape[0]
    flipped = torch.stack([k[b - 1 - i] for i in range(b)])
    own, grad_own = naive_info_nce_terms(q_mix, k, queue, tau)
    other, grad_other = naive_info_nce_terms(q_mix, flipped, queue, tau)
    return lam * own, (1 - lam) * other, lam * grad_own + (1 - lam) * grad_other


def build(queue_size=10, seed=0, **kwargs):
    torch.manual_seed(seed)
    return UnMixMoCo(backbone=BACKBONE, feature_dim=16, queue_size=queue_size, **kwargs).double()


def views(b=4, seed=1, size=8):
    torch.manual_seed(seed)
    return [torch.randn(b, 3, size, size, dtype=torch.float64) for _ in range(2)]


def unit_rows(*shape):
    return F.normalize(torch.randn(*shape, dtype=torch.float64), dim=-1)


# ----------------------------------------------------------------------------- pure functions
def test_global_mixture_matches_naive_loop():
    torch.manual_seed(0)
    x = torch.randn(5, 3, 4, 4, dtype=torch.float64)
    got = unmix_global(x, torch.tensor(0.3, dtype=torch.float64))
    assert torch.allclose(got, naive_global(x, 0.3), atol=1e-12, rtol=0)


@pytest.mark.parametrize('h, w, lam, cy, cx, want', [
    (16, 16, 0.75, 8, 8, (4, 12, 4, 12)),  # side 16 * sqrt(0.25) = 8, centred
    (16, 16, 0.75, 0, 15, (0, 4, 11, 16)),  # clipped at the top and the right edge
    (16, 8, 0.0, 3, 2, (0, 11, 0, 6)),  # lam 0: a whole-image box, clipped
    (16, 16, 1.0, 5, 5, (5, 5, 5, 5)),  # lam 1: an empty box
    (7, 9, 0.5, 3, 4, (1, 5, 1, 7)),  # int(7 * 0.707) = 4, int(9 * 0.707) = 6
])
def test_cutmix_box_closed_form(h, w, lam, cy, cx, want):
    box = cutmix_box(h, w, torch.tensor(lam), torch.tensor(cy), torch.tensor(cx))
    assert box.tolist() == list(want)


def test_cutmix_box_equals_the_authors_host_arithmetic():
    """On the device in float64: the box of Python's int(H * math.sqrt(1.0 - lam)) for every
    float32 lam drawn, centres anywhere."""
    gen = torch.Generator().manual_seed(0)
    lams = torch.rand(2000, generator=gen)
    for lam, cy, cx in zip(lams, torch.randint(0, 37, (2000,), generator=gen),
                           torch.randint(0, 23, (2000,), generator=gen)):
        ratio = math.sqrt(1.0 - float(lam))
        half_h, half_w = int(37 * ratio) // 2, int(23 * ratio) // 2
        want = [min(max(int(cy) - half_h, 0), 37), min(max(int(cy) + half_h, 0), 37),
                min(max(int(cx) - half_w, 0), 23), min(max(int(cx) + half_w, 0), 23)]
        assert cutmix_box(37, 23, lam, cy, cx).tolist() == want


@pytest.mark.parametrize('box', [(4, 12, 4, 12), (0, 4, 11, 16), (5, 5, 5, 5), (0, 16, 0, 16)])
def test_region_mixture_and_corrected_lambda_match_naive_loop(box):
    torch.manual_seed(0)
    x = torch.randn(3, 2, 16, 16, dtype=torch.float64)
    got, lam = unmix_region(x, box)
    want, want_lam = naive_region(x, *box)
    assert torch.equal(got, want) and abs(lam.item() - want_lam) < 1e-12


@pytest.mark.parametrize('lam, tau', [(0.0, 0.2), (0.37, 0.2), (1.0, 0.5), (0.8, 0.07)])
def test_unmix_loss_and_gradient_match_naive_reference(lam, tau):
    torch.manual_seed(2)
    q_mix = unit_rows(5, 6).requires_grad_()
    k, queue = unit_rows(5, 6), unit_rows(7, 6)
    own, other = unmix_loss(q_mix, k, queue, torch.tensor(lam, dtype=torch.float64), tau)
    (own + other).backward()
    want_own, want_other, want_grad = naive_unmix(q_mix.detach(), k, queue, lam, tau)
    assert abs(own.item() - want_own) < 1e-6 and abs(other.item() - want_other) < 1e-6
    assert torch.allclose(q_mix.grad, want_grad, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------- model
@pytest.mark.parametrize('box', [None, (2, 6, 1, 5)])
def test_model_losses_match_naive_reference(box, monkeypatch):
    """With lam and the box pinned: loss_inst, loss_mix, loss_mix_flip equal the naive terms on
    the model's own embeddings and the pre-step queue; a box replaces lam by its pixel share."""
    lam = 0.3
    model = build(queue_size=10).eval()
    model.queue_ptr.fill_(8)
    model.mix_step.fill_(0 if box is None else 1)  # alternation: global, then region
    monkeypatch.setattr(model, 'sample_mix', lambda x: (torch.tensor(lam, dtype=torch.float32),
                                                        torch.tensor(box or (0, 0, 0, 0))))
    reference = copy.deepcopy(model)
    x_q, x_k = views(b=4)
    losses = model([x_q, x_k], mode='loss')
    if box is None:
        x_mix, share = naive_global(x_q, lam), lam
    else:
        x_mix, share = naive_region(x_q, *box)
    assert share == pytest.approx(1 - 16 / 64 if box else lam)
    q, q_mix = reference.embed_query(x_q), reference.embed_query(x_mix)
    k = reference.embed_keys(x_k)
    inst, _ = naive_info_nce_terms(q.detach(), k, reference.queue, 0.2)
    own, other, _ = naive_unmix(q_mix.detach(), k, reference.queue, share, 0.2)
    assert set(losses) == {'loss_inst', 'loss_mix', 'loss_mix_flip', 'acc_inst', 'lam_mean',
                           'mix_global'}
    assert abs(losses['loss_inst'].item() - inst) < 1e-6
    assert abs(losses['loss_mix'].item() - own) < 1e-6
    assert abs(losses['loss_mix_flip'].item() - other) < 1e-6
    assert losses['lam_mean'].item() == pytest.approx(share)
    assert torch.allclose(model.queue[[8, 9, 0, 1]], k, atol=1e-12)


def record_schedule(model, monkeypatch):
    seen = []
    use_global = model.use_global

    def spy(device):
        seen.append(use_global(device))
        return seen[-1]

    monkeypatch.setattr(model, 'use_global', spy)
    return seen


def test_alternation_follows_a_checkpointed_step_counter(monkeypatch):
    """global, region, global, ... from mix_step; a fresh model loading the state dict after 3
    steps continues with region (the counter is a persistent buffer)."""
    model = build()
    seen = record_schedule(model, monkeypatch)
    flags = [model(views(seed=i), mode='loss')['mix_global'].item() for i in range(3)]
    assert seen == [True, False, True] and flags == [1.0, 0.0, 1.0]
    assert int(model.state_dict()['mix_step']) == 3
    resumed = build(seed=7)
    resumed.load_state_dict(model.state_dict())
    seen = record_schedule(resumed, monkeypatch)
    resumed(views(seed=3), mode='loss')
    assert seen == [False]


@pytest.mark.slow
def test_resume_is_bit_identical():
    """5 steps in one go == 3 steps, state dict and RNG state handed to a new model, 2 steps."""
    batches = [views(seed=i) for i in range(5)]

    def steps(model, chunk):
        return [model(batch, mode='loss') for batch in chunk]

    model = build().train()
    torch.manual_seed(123)
    straight = steps(model, batches)
    first = build().train()
    torch.manual_seed(123)
    steps(first, batches[:3])
    state, rng = copy.deepcopy(first.state_dict()), torch.get_rng_state()
    second = build(seed=9).train()
    second.load_state_dict(state)
    torch.set_rng_state(rng)
    resumed = steps(second, batches[3:])
    for want, got in zip(straight[3:], resumed):
        assert all(torch.equal(want[name], got[name]) for name in want)
    assert [s['mix_global'].item() for s in straight] == [1, 0, 1, 0, 1]


@pytest.mark.parametrize('prob, want', [(1.0, [1.0] * 3), (0.0, [0.0] * 3)])
def test_random_schedule_uses_the_probability(prob, want):
    model = build(mix_schedule='random', mix_global_prob=prob)
    assert [model(views(seed=i), mode='loss')['mix_global'].item() for i in range(3)] == want


def test_sample_mix_box_lies_in_the_image():
    model = build()
    x = torch.zeros(2, 3, 16, 12)
    torch.manual_seed(0)
    for _ in range(50):
        lam, box = model.sample_mix(x)
        y1, y2, x1, x2 = box.tolist()
        assert 0 <= y1 <= y2 <= 16 and 0 <= x1 <= x2 <= 12 and 0 <= lam.item() <= 1


def test_defaults_are_the_papers():
    """lam ~ Beta(1, 1) (paper and code: --beta 1.0); the code's coin has P(global) = 0.5
    (--unmix_prob 0.5); one tau for all terms (the code divides all logits by T = 0.2)."""
    params = inspect.signature(UnMixMoCo.__init__).parameters
    assert params['mix_alpha'].default == 1.0
    assert params['mix_schedule'].default == 'alternate'
    assert params['mix_global_prob'].default == 0.5
    assert build().temperature == 0.2
    for bad in (dict(mix_alpha=0.0), dict(mix_schedule='coin'), dict(mix_global_prob=1.5)):
        with pytest.raises(ValueError):
            build(**bad)


def test_training_step_on_tiny_resnet18():
    """Two SGD steps (global, then region) at 32 px, batch 8, queue 32: finite, params move."""
    torch.manual_seed(0)
    model = UnMixMoCo(backbone=dict(depth=18, small_stem=False), queue_size=32).train()
    before = [p.detach().clone() for p in model.backbone.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for flag in (1.0, 0.0):
        optimizer.zero_grad()
        losses = model([torch.randn(8, 3, 32, 32), torch.randn(8, 3, 32, 32)], mode='loss')
        sum(v for n, v in losses.items() if 'loss' in n).backward()
        optimizer.step()
        assert losses['mix_global'].item() == flag
        assert all(torch.isfinite(v).all() for v in losses.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, model.backbone.parameters()))
    assert int(model.queue_ptr) == 16 and int(model.mix_step) == 2


# ----------------------------------------------------------------------------- configs
@pytest.mark.parametrize('name, base', [('unmix_r18_tiny.py', 'mocov2_r18_tiny.py'),
                                        ('unmix_r18_digits.py', 'mocov2_r18_digits.py')])
def test_config_validates_builds_and_differs_only_in_method_fields(name, base):
    cfg = load_config(str(ROOT / 'configs' / name))  # the views' size filled, as train.py does
    validate_config(cfg)
    cfg.model.queue_size = 256
    assert isinstance(MODELS.build(cfg.model), UnMixMoCo)
    a = Config.fromfile(str(ROOT / 'configs' / name)).to_dict()
    b = Config.fromfile(str(ROOT / 'configs' / base)).to_dict()
    model_a, model_b = a.pop('model'), b.pop('model')
    assert a == b
    changed = {k for k in model_a if k not in model_b or model_a[k] != model_b[k]}
    assert changed == {'type', 'mix_alpha', 'mix_schedule'} and model_a['type'] == 'UnMixMoCo'


@pytest.mark.parametrize('option, words', [('model.mix_schedule=alternating', "'alternate'"),
                                           ('model.mix_global_prob=1.5', '[0, 1]'),
                                           ('model.mix_alpha=-1', '> 0')])
def test_config_check_rejects_bad_values(option, words):
    cfg = Config.fromfile(str(ROOT / 'configs/unmix_r18_tiny.py'))
    key, value = option.split('=', 1)
    merge_options(cfg, {key: parse_cfg_option(value)})
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert key in str(err.value) and words in str(err.value), str(err.value)


def test_the_schedule_is_decided_on_the_device(monkeypatch):
    """The alternation never reads the step counter back to the host (a read per step would
    make the host wait for the GPU): a loaded counter of 5 gives a region step, then global."""
    model = build()
    reads = []
    for name in ('__int__', '__bool__', 'item', 'tolist'):
        real = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _real=real, **k:
                            reads.append(self is model.mix_step) or _real(self, *a, **k))
    model.load_state_dict({**model.state_dict(), 'mix_step': torch.tensor(5)})
    flags = [model(views(seed=i), mode='loss')['mix_global'] for i in range(2)]
    assert True not in reads
    assert [f.item() for f in flags] == [0.0, 1.0] and model.mix_step.item() == 7
