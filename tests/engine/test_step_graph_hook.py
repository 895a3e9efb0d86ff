"""StepGraphHook: the training step after the views replayed from one CUDA graph. On a CPU the
hook leaves the run as it is; what a graph cannot replay is refused before training; the first
step is mmengine's step, and the warm-up before a capture trains copies only; on a GPU (marker
`cuda`) a graphed run captures once per epoch and its first replays give the eager losses.
Resuming a graphed run exactly is checked through real processes by tools/gpu_proof.sh
(KILL_CONFIG=configs/mixco_r18_tiny_graph.py)."""
import copy

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import OptimWrapper
from mmengine.registry import MODELS
from mmengine.runner import Runner

import benchmark.components  # noqa: F401  registers the hooks, Digits and the models
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.launch import load_config
from benchmark.engine.step_graph import GraphedTrainStep, refuse_step_graph
from tests.conftest import ROOT

ITERATIONS = 6


def _cfg(tmp_path, method: str, graph: bool, lr_on_device: bool = False,
         per_iteration_lr: bool = False, **model) -> Config:
    cfg = load_config(str(ROOT / f'configs/{method}_r18_digits.py'))
    cfg.merge_from_dict({'train_dataloader.batch_size': 8, 'train_dataloader.num_workers': 0,
                         'train_dataloader.persistent_workers': False,
                         'train_dataloader.num_batch_per_epoch': ITERATIONS // 2,
                         'train_cfg.max_epochs': 2, 'default_hooks.logger.interval': 1,
                         'default_hooks.checkpoint': None})
    if 'queue_size' in cfg.model:
        cfg.model.queue_size = 32
    cfg.model.update(model)
    if per_iteration_lr:  # a new learning rate every step
        cfg.param_scheduler = [dict(type='LinearLR', start_factor=0.5, by_epoch=False, begin=0,
                                    end=ITERATIONS)]
    cfg.custom_hooks = [dict(type='RunInfoHook'), dict(type='NaNGuardHook')]
    if graph:
        cfg.custom_hooks.append(dict(type='StepGraphHook', lr_on_device=lr_on_device))
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend')]
    name = f'{method}-{"graph" if graph else "eager"}'
    cfg.work_dir, cfg.log_level = str(tmp_path / name), 'WARNING'
    cfg.experiment_name = f'step-graph-{name}-{tmp_path.name}'
    return cfg


def _train(cfg) -> tuple:
    """(losses per iteration, final state dict, the runner) of a run of `cfg`."""
    runner = Runner.from_cfg(cfg)
    runner.train()
    losses = runner.message_hub.log_scalars['train/loss'].data[0]
    state = {k: v.detach().cpu().clone() for k, v in runner.model.state_dict().items()}
    return losses, state, runner


@pytest.mark.skipif(torch.cuda.is_available(), reason='the hook acts on a GPU')
def test_on_a_cpu_the_hook_leaves_the_run_as_it_is(tmp_path):
    """The same digits run with and without the hook: equal losses and weights, bit for bit,
    and the model keeps its class's step."""
    ours, our_state, runner = _train(_cfg(tmp_path, 'mixco', graph=True))
    theirs, their_state, _ = _train(_cfg(tmp_path, 'mixco', graph=False))
    assert len(ours) == ITERATIONS and (ours == theirs).all()
    assert all(torch.equal(v, their_state[k]) for k, v in our_state.items())
    assert 'train_step' not in runner.model.__dict__
    assert next(h for h in runner.hooks if type(h).__name__ == 'StepGraphHook').step is None


@pytest.mark.parametrize('options, message', [
    ({'optim_wrapper.accumulative_counts': 2}, 'optim_wrapper.accumulative_counts must be 1'),
    ({'optim_wrapper.clip_grad': dict(max_norm=1.0)}, 'optim_wrapper.clip_grad is not captured'),
    ({'optim_wrapper.loss_scale': 'dynamic'}, 'a loss scaler reads the device every step'),
    ({'optim_wrapper.optimizer': dict(_delete_=True, type='AdamW', lr=1e-3)},
     'the optimizer is AdamW'),
    ({'custom_hooks': [dict(type='OnlineLinearProbeHook'), dict(type='StepGraphHook')]},
     'OnlineLinearProbeHook reads the features'),
])
def test_what_a_graph_cannot_replay_is_refused_before_the_run(options, message):
    """The config check refuses it in one line, naming the key (the hook checks again before
    training); the shipped graph config passes."""
    cfg = load_config(str(ROOT / 'configs/mixco_r18_tiny_graph.py'))
    validate_config(cfg, world_size=1, cuda=True)
    cfg.merge_from_dict(options)
    with pytest.raises(ConfigError, match=message) as err:
        validate_config(cfg, world_size=1, cuda=True)
    assert '\n' not in str(err.value) and str(err.value).startswith('StepGraphHook: ')
    with pytest.raises(ConfigError, match=message):
        refuse_step_graph(cfg)


def test_the_first_step_is_mmengines_step_and_a_copy_gets_its_own(tiny_backbones):
    """While the optimizer has no state the step runs eagerly: the same loss and weights as
    mmengine's `train_step`, bit for bit. A deep copy of the model gets a step bound to the
    copy, with no graph."""
    torch.manual_seed(0)
    model = MODELS.build(dict(type='MixCoMoCo', feature_dim=16, queue_size=32)).train()
    twin = copy.deepcopy(model)
    data = dict(inputs=[torch.randn(8, 3, 16, 16), torch.randn(8, 3, 16, 16)])
    ours = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    theirs = OptimWrapper(torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9))
    model.train_step = GraphedTrainStep(model, lambda: 0)
    rng = torch.get_rng_state()
    logs = model.train_step(copy.deepcopy(data), ours)
    torch.set_rng_state(rng)
    their_logs = twin.train_step(copy.deepcopy(data), theirs)
    assert torch.equal(logs['loss'], their_logs['loss'])
    # its logs hold no autograd graph (a kept graph would tie the gradients' nodes to a stream)
    assert their_logs['loss'].requires_grad and not logs['loss'].requires_grad
    step = model.train_step
    assert not step.warm and step.captures == 0 and ours.optimizer.state  # no graph yet
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 twin.state_dict().values()))
    copied = copy.deepcopy(model)
    assert copied.train_step.model is copied and copied.train_step.graph is None


def test_the_throwaway_warm_up_step_leaves_the_run_alone(tiny_backbones):
    """The step before a process's first capture trains copies: the model, the optimizer's
    state and the random state are as before it, a scheduler's wrapping of the optimizer's
    `step` included."""
    torch.manual_seed(0)
    model = MODELS.build(dict(type='MixCoMoCo', feature_dim=16, queue_size=32)).train()
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                           weight_decay=1e-4))
    torch.optim.lr_scheduler.CosineAnnealingLR(wrapper.optimizer, T_max=10)  # wraps its step
    inputs = [torch.randn(8, 3, 16, 16), torch.randn(8, 3, 16, 16)]
    step = GraphedTrainStep(model, lambda: 0)
    step(dict(inputs=inputs), wrapper)  # the first step: eager, creates the optimizer's state
    before = copy.deepcopy((model.state_dict(), wrapper.optimizer.state_dict()))
    rng = torch.get_rng_state()
    step._warm_up(wrapper.optimizer, inputs, None, None)
    assert step.warm and torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 before[0].values()))
    state = wrapper.optimizer.state_dict()['state']
    assert all(torch.equal(state[i]['momentum_buffer'], s['momentum_buffer'])
               for i, s in before[1]['state'].items())


def test_the_graph_is_captured_again_exactly_when_what_it_baked_in_changes(monkeypatch,
                                                                          tiny_backbones):
    """With the CUDA graph replaced by eager steps (its capture counted), the step captures
    after the first (mmengine's) step, replays while nothing changes, and captures again for a
    new learning rate, a new epoch and each change of the batch size, warming up only once
    (one graph is kept: the one of the last change); what it returns
    are copies of the graph's log variables."""
    from benchmark.engine import step_graph

    class EagerGraph:  # what StepGraph would replay, stepped eagerly
        def __init__(self, model, optimizer, inputs, dtype, warmup, data_samples, lr=None):
            self.model, self.optimizer, self.log_vars = model, optimizer, None

        def __call__(self, inputs, data_samples=None):
            self.log_vars = step_graph.whole_step(self.model, self.optimizer, inputs)
            return self.log_vars

    monkeypatch.setattr(step_graph, 'StepGraph', EagerGraph)
    torch.manual_seed(0)
    model = MODELS.build(dict(type='MoCo', feature_dim=16, queue_size=32)).train()
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    epoch = [0]
    step = GraphedTrainStep(model, lambda: epoch[0])
    warm_ups = []
    monkeypatch.setattr(step, '_warm_up', lambda *args: warm_ups.append(1) or
                        setattr(step, 'warm', True))

    def batch(n=8):
        return dict(inputs=[torch.randn(n, 3, 16, 16), torch.randn(n, 3, 16, 16)])
    captures = []
    for change in (None, None, None, 'lr', None, 'epoch', 'batch', None):
        if change == 'lr':
            wrapper.optimizer.param_groups[0]['lr'] = 0.05
        epoch[0] += change == 'epoch'
        logs = step(batch(4 if change == 'batch' else 8), wrapper)
        assert torch.isfinite(logs['loss'])
        captures.append(step.captures)
    assert captures == [0, 1, 1, 2, 2, 3, 4, 5] and warm_ups == [1]  # one graph at a time
    assert logs['loss'] is not step.graph.log_vars['loss']
    assert torch.equal(logs['loss'], step.graph.log_vars['loss'])


def test_with_the_learning_rate_on_the_device_a_schedule_needs_no_new_capture(monkeypatch,
                                                                            tiny_backbones):
    """lr_on_device, with the CUDA graph replaced by eager steps that read the learning rates as
    the graph does (from the device tensors, through `device_lr`): a learning rate changed
    every step (a per-iteration schedule) is captured once, after the first step, trains as
    eager SGD at those rates does, and the optimizer's groups keep their own numbers."""
    from benchmark.engine import step_graph

    class EagerGraph:  # what StepGraph would replay, stepped eagerly from its device rates
        def __init__(self, model, optimizer, inputs, dtype, warmup, data_samples, lr=None):
            self.model, self.optimizer, self.lr = model, optimizer, lr

        def __call__(self, inputs, data_samples=None):
            with step_graph.device_lr(self.optimizer, self.lr):
                return step_graph.whole_step(self.model, self.optimizer, inputs)

    monkeypatch.setattr(step_graph, 'StepGraph', EagerGraph)
    torch.manual_seed(0)
    model = MODELS.build(dict(type='MoCo', feature_dim=16, queue_size=32)).train()
    twin = copy.deepcopy(model)
    wrappers = [OptimWrapper(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9,
                                             weight_decay=1e-4)) for m in (model, twin)]
    gen = torch.Generator().manual_seed(1)
    batches = [dict(inputs=[torch.randn(8, 3, 16, 16, generator=gen) for _ in range(2)])
               for _ in range(5)]
    rates = [0.1, 0.08, 0.05, 0.03, 0.01]
    rng = torch.get_rng_state()
    step = GraphedTrainStep(model, lambda: 0, lr_on_device=True)
    for rate, data in zip(rates, batches):
        wrappers[0].optimizer.param_groups[0]['lr'] = rate
        step(copy.deepcopy(data), wrappers[0])
    torch.set_rng_state(rng)
    for rate, data in zip(rates, batches):
        wrappers[1].optimizer.param_groups[0]['lr'] = rate
        type(twin).train_step(twin, copy.deepcopy(data), wrappers[1])
    assert step.captures == 1 and step.lr[0].item() == pytest.approx(0.01)
    group = wrappers[0].optimizer.param_groups[0]
    assert group['lr'] == 0.01 and not group['fused'] and group['foreach'] is None
    for (name, ours), theirs in zip(model.state_dict().items(), twin.state_dict().values()):
        assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-7), name


def test_device_lr_steps_as_sgd_does_a_parameter_without_momentum_buffer_included():
    """SGD's fused form reading its learning rate from a tensor (`device_lr`) steps as the
    foreach form at that rate, a parameter that had no gradient at the first step (no momentum
    buffer yet) and one whose buffer has another layout included; after it the group's own
    numbers are back."""
    from benchmark.engine.step_graph import device_lr
    torch.manual_seed(0)
    ours = [torch.nn.Parameter(torch.randn(4, 3)),
            torch.nn.Parameter(torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last))]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    optimizers = [torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-4)
                  for ps in (ours, theirs)]
    for params, optimizer in zip((ours, theirs), optimizers):
        params[0].grad = torch.ones_like(params[0])  # the second has no gradient yet
        optimizer.step()
        for p in params:
            p.grad = torch.full_like(p, 0.5)
    buffer = optimizers[0].state[ours[0]]['momentum_buffer']  # the same values, transposed
    optimizers[0].state[ours[0]]['momentum_buffer'] = torch.empty(3, 4).t().copy_(buffer)
    optimizers[1].param_groups[0]['lr'] = 0.05
    with device_lr(optimizers[0], [torch.tensor(0.05)]):
        optimizers[0].step()
    optimizers[1].step()
    assert all(torch.allclose(a, b, rtol=0, atol=1e-7) for a, b in zip(ours, theirs))
    assert all(optimizers[0].state[p]['momentum_buffer'].stride() == p.stride() for p in ours)
    group = optimizers[0].param_groups[0]
    assert group['lr'] == 0.1 and not group['fused'] and group['foreach'] is None


@pytest.mark.cuda
@pytest.mark.parametrize('lr_on_device', [False, True])
def test_a_graphed_run_trains_as_the_eager_run(tmp_path, lr_on_device):
    """On a GPU (fp32, TF32 off), MoCo-v2 digits without shuffle-BN (a step that draws nothing
    at random): the graphed run captures once per epoch after its first (eager) step, every
    loss is finite, and its first replays give the eager run's losses (relative 1e-4: the
    captured kernels may differ from eager ones in the last bits; later steps drift apart as
    small-batch training amplifies such differences). The graph restores the model's own step
    after training. The same with the learning rate read from the device, under a schedule
    that changes it every step (still one capture per epoch)."""
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        graphed, _, runner = _train(_cfg(tmp_path / 'graph', 'mocov2', graph=True,
                                         lr_on_device=lr_on_device,
                                         per_iteration_lr=lr_on_device, shuffle_bn='off'))
        eager, _, _ = _train(_cfg(tmp_path / 'eager', 'mocov2', graph=False,
                                  per_iteration_lr=lr_on_device, shuffle_bn='off'))
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    hook = next(h for h in runner.hooks if type(h).__name__ == 'StepGraphHook')
    assert hook.step.captures == 2 and 'train_step' not in runner.model.__dict__
    assert torch.isfinite(torch.as_tensor(graphed)).all()
    assert graphed[0] == eager[0]  # the first step is eager in both
    assert torch.allclose(torch.as_tensor(graphed[:3]), torch.as_tensor(eager[:3]), rtol=1e-4,
                          atol=0), (graphed.tolist(), eager.tolist())
