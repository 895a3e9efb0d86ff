"""Every method's training step is ready to be captured and replayed as one device program:
over several steps (`step_graph.whole_step`) no parameter, buffer, gradient or optimizer state
changes its storage, nothing is read back to the host, every random draw comes from a generator
that a checkpoint saves, and the forward with its losses traces as one graph (no break)."""
import copy

import pytest
import torch
import torch._dynamo
from mmengine.registry import MODELS

import methods  # noqa: F401  (registers the models)
from benchmark.engine.step_graph import whole_step
from benchmark.engine.rng_state import capture_rng_state, restore_rng_state
from benchmark.harness.speed.dispatch import DispatchCount

METHODS = {'mocov2': dict(type='MoCo'), 'mixco': dict(type='MixCoMoCo'),
           'simclr': dict(type='SimCLR'), 'mixco_simclr': dict(type='MixCoSimCLR'),
           'imix': dict(type='IMixMoCo'), 'unmix': dict(type='UnMixMoCo'),
           'mochi': dict(type='MoCHiMoCo', mix_hardest=8, mix_synthetic=8,
                         mix_query_synthetic=4, mix_warmup_epochs=0)}


def build(method: str):
    torch.manual_seed(0)
    cfg = dict(METHODS[method], feature_dim=16)
    if 'simclr' not in method:
        cfg['queue_size'] = 32
    model = MODELS.build(cfg).train()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1,
                                momentum=0.9, weight_decay=1e-4)
    return model, optimizer


def batch(seed: int):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(8, 3, 16, 16, generator=gen) for _ in range(2)]


def state_tensors(model, optimizer) -> dict:
    """Every tensor a captured step reads or writes in place, by name."""
    tensors = {f'param {n}': p for n, p in model.named_parameters()}
    tensors.update({f'buffer {n}': b for n, b in model.named_buffers()})
    tensors.update({f'grad {n}': p.grad for n, p in model.named_parameters()
                    if p.grad is not None})
    for i, state in enumerate(optimizer.state.values()):
        tensors.update({f'optimizer {i} {k}': v for k, v in state.items() if torch.is_tensor(v)})
    return tensors


@pytest.mark.parametrize('method', METHODS)
def test_the_step_keeps_every_storage_reads_nothing_back_and_replays(method, tiny_backbones):
    """After two warm-up steps (gradients and momentum buffers exist): three more keep every
    tensor's storage (the originals stay referenced, so a reassigned tensor cannot land on the
    same address), dispatch no host read, and do change the weights, the key encoder and the
    queue in place. A copy stepped from the same saved RNG state (what a checkpoint holds)
    ends equal bit for bit: no draw escapes the saved generators."""
    model, optimizer = build(method)
    for seed in range(2):
        whole_step(model, optimizer, batch(seed))
    twin, twin_optimizer = copy.deepcopy((model, optimizer))  # one memo: the twin's parameters
    rng = capture_rng_state()
    before = {name: t.detach() for name, t in state_tensors(model, optimizer).items()}
    values = {name: t.clone() for name, t in before.items()}
    with DispatchCount() as count:
        logs = [whole_step(model, optimizer, batch(seed)) for seed in range(2, 5)]
    assert count.host_reads == {}, dict(count.host_reads)
    after = state_tensors(model, optimizer)
    assert after.keys() == before.keys()
    moved = [name for name, t in after.items()
             if t.data_ptr() != before[name].data_ptr()
             or t.untyped_storage().data_ptr() != before[name].untyped_storage().data_ptr()]
    assert moved == []
    changed = {name for name, t in after.items() if not torch.equal(t, values[name])}
    expected = {'param backbone.0.weight', 'optimizer 0 momentum_buffer',
                'buffer backbone.1.running_mean'}
    if 'simclr' not in method:
        expected |= {'param backbone_momentum.0.weight', 'buffer queue', 'buffer queue_ptr'}
        assert model.queue_ptr.dim() == 0 and model.queue_ptr.item() == 5 * 8 % 32
    assert expected <= changed, expected - changed

    torch.manual_seed(12345)  # the generators move on, then the checkpoint's state comes back
    restore_rng_state(rng)
    replayed = [whole_step(twin, twin_optimizer, batch(seed)) for seed in range(2, 5)]
    for ours, theirs in zip(logs, replayed):
        assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 twin.state_dict().values()))


@pytest.mark.parametrize('method', METHODS)
def test_the_forward_and_losses_trace_as_one_graph(method, tiny_backbones):
    """torch._dynamo.explain traces `forward(mode='loss')` with no graph break."""
    model, _ = build(method)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda inputs: model(inputs, mode='loss'))(batch(0))
    assert explained.graph_break_count == 0, [str(b.reason)[:200]
                                              for b in explained.break_reasons]
    assert explained.graph_count == 1


@pytest.mark.slow
def test_five_compiled_steps_equal_eager_and_resume_exactly(tiny_backbones):
    """MixCo in fp32: torch.compile of the whole step (forward and losses as one graph, its
    backward compiled by AOTAutograd, the optimizer step as another graph; inductor drawing
    random numbers as eager does) gives the eager step's losses (relative 1e-5) and state: every
    weight, buffer and the queue within 1e-5 of the eager one relative to its norm (1e-8 more
    for tensors near zero, such as the key encoder's young biases). Resumed from a checkpoint
    taken after three steps, the compiled run ends with the uninterrupted one's state bit for bit.
    Its learning rate is a tensor: a new value takes effect without compiling again."""
    model, optimizer = build('mixco')
    twin, twin_optimizer = copy.deepcopy((model, optimizer))
    # The compiled step's learning rate is a tensor: a scheduler changes it without recompiling.
    optimizer = torch.optim.SGD(optimizer.param_groups[0]['params'], lr=torch.tensor(0.1),
                                momentum=0.9, weight_decay=1e-4, foreach=True)
    rng = capture_rng_state()
    torch._dynamo.reset()
    # Scalar C++ kernels (no SIMD): the same program, compiled in about half the time.
    step = torch.compile(whole_step, options={'fallback_random': True, 'cpp.vec_isa_ok': False})
    compiled = []
    for seed in range(5):
        if seed == 3:  # a checkpoint after three steps: weights, queue, optimizer, generators
            checkpoint = copy.deepcopy((model.state_dict(), optimizer.state_dict(),
                                        capture_rng_state()))
        compiled.append(step(model, optimizer, batch(seed))['loss'].detach())
    uninterrupted = copy.deepcopy(model.state_dict())
    restore_rng_state(rng)
    eager = [whole_step(twin, twin_optimizer, batch(seed))['loss'].detach() for seed in range(5)]
    assert torch.allclose(torch.stack(compiled), torch.stack(eager), rtol=1e-5, atol=0)
    for (name, ours), theirs in zip(model.state_dict().items(), twin.state_dict().values()):
        assert (ours - theirs).float().norm() <= 1e-5 * theirs.float().norm() + 1e-8, name

    weights, optimizer_state, generators = checkpoint  # resumed: the compiled step goes on
    model.load_state_dict(weights)
    optimizer.load_state_dict(optimizer_state)
    restore_rng_state(generators)
    for seed in (3, 4):
        step(model, optimizer, batch(seed))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 uninterrupted.values()))
    graphs = torch._dynamo.utils.counters['stats']['unique_graphs']
    optimizer.param_groups[0]['lr'].fill_(0.05)
    weight = model.backbone[0].weight
    before = weight.detach().clone()
    step(model, optimizer, batch(5))
    assert torch._dynamo.utils.counters['stats']['unique_graphs'] == graphs
    update = optimizer.state[weight]['momentum_buffer']  # SGD: w <- w - lr * momentum buffer
    assert torch.allclose(weight, before - 0.05 * update, rtol=0, atol=1e-7)
