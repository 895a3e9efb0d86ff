"""The whole training step replayed from one CUDA graph (`StepGraph`): on a GPU it captures
every method's step and trains as the eager step does; elsewhere it refuses with one line."""
import copy

import pytest
import torch
from mmengine.registry import MODELS

import methods  # noqa: F401  (registers the models)
from benchmark.engine.step_graph import StepGraph, whole_step

METHODS = {'mocov2': dict(type='MoCo'), 'mixco': dict(type='MixCoMoCo'),
           'simclr': dict(type='SimCLR'), 'mixco_simclr': dict(type='MixCoSimCLR'),
           'imix': dict(type='IMixMoCo'), 'unmix': dict(type='UnMixMoCo'),
           'mochi': dict(type='MoCHiMoCo', mix_hardest=8, mix_synthetic=8,
                         mix_query_synthetic=4, mix_warmup_epochs=0)}


def build(method: str, device: str):
    torch.manual_seed(0)
    cfg = dict(METHODS[method], feature_dim=16)
    if 'simclr' not in method:
        cfg['queue_size'] = 32
    model = MODELS.build(cfg).to(device).train()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1,
                                momentum=0.9, weight_decay=1e-4)
    return model, optimizer


def batch(seed: int, device: str = 'cpu'):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(8, 3, 16, 16, generator=gen).to(device) for _ in range(2)]


def test_a_step_graph_refuses_views_off_the_gpu(tiny_backbones):
    model, optimizer = build('mocov2', 'cpu')
    with pytest.raises(ValueError, match='the views must be CUDA tensors'):
        StepGraph(model, optimizer, batch(0))


@pytest.mark.cuda
@pytest.mark.parametrize('method', METHODS)
def test_every_step_captures_and_trains_in_place(method, tiny_backbones):
    """Three replays on new views: losses finite, the weights (and the key encoder and queue)
    change, every parameter keeps its storage, and the replay's loss matches an eager step
    taken from the same state on the same views where the step draws nothing at random."""
    model, optimizer = build(method, 'cuda')
    graph = StepGraph(model, optimizer, batch(0, 'cuda'), warmup=2)
    pointers = {n: p.data_ptr() for n, p in model.named_parameters()}
    before = copy.deepcopy(model.state_dict())
    for seed in range(1, 4):
        loss = graph(batch(seed, 'cuda'))['loss']
        assert torch.isfinite(loss), (method, seed)
    torch.cuda.synchronize()
    assert {n: p.data_ptr() for n, p in model.named_parameters()} == pointers
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert 'backbone.0.weight' in changed
    if 'simclr' not in method:
        assert {'backbone_momentum.0.weight', 'queue', 'queue_ptr'} <= changed


@pytest.mark.cuda
@pytest.mark.parametrize('lr_on_device', [False, True])
def test_the_replayed_step_equals_the_eager_step(lr_on_device, tiny_backbones):
    """SimCLR draws nothing inside its step: fp32 (TF32 off), three replays give the eager
    step's losses and weights (relative 1e-4: kernels may differ between capture and eager).
    With the learning rate on the device (`device_lr`), each replay reads a new one, as the
    eager step does from the group's number."""
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        model, optimizer = build('simclr', 'cuda')
        twin, twin_optimizer = copy.deepcopy((model, optimizer))
        lr = [torch.tensor(0.1, device='cuda')] if lr_on_device else None
        graph = StepGraph(model, optimizer, batch(0, 'cuda'), warmup=2, lr=lr)
        for _ in range(2):
            whole_step(twin, twin_optimizer, batch(0, 'cuda'))
        for seed, rate in zip(range(1, 4), (0.1, 0.05, 0.02) if lr_on_device else (0.1,) * 3):
            if lr_on_device:
                lr[0].fill_(rate)
                twin_optimizer.param_groups[0]['lr'] = rate
            ours = graph(batch(seed, 'cuda'))['loss'].clone()
            theirs = whole_step(twin, twin_optimizer, batch(seed, 'cuda'))['loss']
            assert torch.allclose(ours, theirs, rtol=1e-4, atol=0), (seed, ours, theirs)
        assert optimizer.param_groups[0]['lr'] == 0.1  # the group's own number
        for (name, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
            assert (a - b).float().norm() <= 1e-4 * b.float().norm() + 1e-6, name
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
