"""The speed switches as configs use them: channels_last, torch.compile, the *_fast configs (a
step of each through tools/train.py: tests/tools/test_train_tool.py; torch.compile through it:
tests/e2e/test_train_tool_runs.py)."""
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config

from benchmark.engine.channels_last import (ChannelsLastDistributedDataParallel, ChannelsLastHook,
                                            to_channels_last, use_channels_last,
                                            use_channels_last_wrapper)
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from methods.moco import MoCo
from tests.conftest import ROOT

NHWC = torch.channels_last


def tiny_moco():
    torch.manual_seed(0)
    return MoCo(backbone=dict(depth=18, small_stem=True), feature_dim=16, queue_size=32).eval()


def test_channels_last_converts_weights_and_inputs_and_keeps_values():
    ref, model = tiny_moco(), tiny_moco()
    params = list(model.parameters())
    assert use_channels_last(model) is model and use_channels_last(model) is model
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]  # optimizer-safe
    convs = [m.weight for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs and all(w.is_contiguous(memory_format=NHWC) for w in convs)
    assert model.queue.dtype == torch.float32 and model.queue.is_contiguous()
    seen = []
    model.backbone.register_forward_pre_hook(lambda mod, args: seen.append(
        args[0].is_contiguous(memory_format=NHWC)))
    x = torch.randn(4, 3, 16, 16)
    out = model(inputs=[x], mode='tensor')  # as mmengine calls it: keyword inputs
    assert seen == [True]  # converted once, by the one pre-hook
    torch.testing.assert_close(out, ref(inputs=[x], mode='tensor'), rtol=1e-4, atol=1e-5)


def test_channels_last_wrapper_is_chosen_only_with_the_hook():
    plain = Config(dict(custom_hooks=[dict(type='RunInfoHook')]))
    use_channels_last_wrapper(plain)
    assert 'model_wrapper_cfg' not in plain
    fast = Config(dict(custom_hooks=[dict(type='ChannelsLastHook')], find_unused_parameters=True,
                       model_wrapper_cfg=dict(static_graph=True)))
    use_channels_last_wrapper(fast)
    assert fast.model_wrapper_cfg == dict(type='ChannelsLastDistributedDataParallel',
                                          static_graph=True, broadcast_buffers=False,
                                          find_unused_parameters=True)
    use_channels_last_wrapper(fast)  # twice: the same
    assert fast.model_wrapper_cfg['type'] == 'ChannelsLastDistributedDataParallel'
    other = Config(dict(custom_hooks=[dict(type='ChannelsLastHook')],
                        model_wrapper_cfg=dict(type='MMFullyShardedDataParallel')))
    with pytest.raises(ValueError, match="model_wrapper_cfg.type='MMFullyShardedDataParallel'"):
        use_channels_last_wrapper(other)


def test_to_channels_last_touches_only_4d_floating_tensors():
    labels, image = torch.arange(4), torch.randn(2, 3, 4, 4)
    out = to_channels_last(dict(inputs=[image], labels=labels, name='x'))
    assert out['inputs'][0].is_contiguous(memory_format=NHWC)
    assert out['labels'] is labels and out['name'] == 'x'
    assert not image.is_contiguous(memory_format=NHWC)  # the input itself is not changed


def _steps(model, step, n=3):
    """n SGD steps (momentum, weight decay) of `step(data, optim_wrapper)`; the final state."""
    from mmengine.optim import OptimWrapper
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                           weight_decay=1e-4))
    gen = torch.Generator().manual_seed(0)
    for i in range(n):
        torch.manual_seed(i)  # MoCo's batch shuffle
        step(dict(inputs=[torch.randn(4, 3, 16, 16, generator=gen) for _ in range(2)]), wrapper)
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
def test_channels_last_ddp_steps_equal_the_plain_channels_last_steps(free_port):
    """One gloo process: DDP over a model converted *before* wrapping computes exactly the
    steps of the unwrapped NHWC model. Converting after wrapping (ChannelsLastHook inside
    MMDistributedDataParallel, as before the wrapper existed) made the first step after every
    start differ by up to 0.08 in the weights (DDP's "Grad strides do not match bucket view
    strides" warning, pytorch/pytorch#47163, which says it is harmless), so a resumed run was
    not bit-identical; tools/kill_resume.py found it."""
    import torch.distributed as dist
    plain = use_channels_last(tiny_moco().train())
    expected = _steps(plain, plain.train_step)
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{free_port}', rank=0,
                            world_size=1)
    try:
        model = tiny_moco().train()
        wrapped = ChannelsLastDistributedDataParallel(module=model, broadcast_buffers=False)
        assert model.backbone.conv1.weight.is_contiguous(memory_format=NHWC)
        ChannelsLastHook().before_run(SimpleNamespace(model=wrapped))  # finds nothing to do
        got = _steps(model, wrapped.train_step)
    finally:
        dist.destroy_process_group()
    assert [k for k in expected if not torch.equal(expected[k], got[k])] == []


def mocov2_cfg(**options):
    cfg = Config.fromfile(str(ROOT / 'configs/mocov2_r18_tiny.py'))
    cfg.merge_from_dict(options)
    return cfg


@pytest.mark.parametrize('value', [True, False, dict(mode='max-autotune'),
                                   dict(backend='eager', fullgraph=False, dynamic=None)])
def test_compile_switch_accepts_runner_values(value):
    validate_config(mocov2_cfg(compile=value))


@pytest.mark.parametrize('value, words', [
    ('yes', 'compile must be True or False or a dict'),
    (dict(mdoe='default'), "unknown key 'compile.mdoe' (did you mean 'compile.mode'?)"),
    (dict(mode='fast'), "compile.mode: unknown value 'fast'"),
    (dict(fullgraph='no'), 'compile.fullgraph must be True or False'),
])
def test_compile_switch_rejects_bad_values_in_one_line(value, words):
    with pytest.raises(ConfigError, match='.*') as err:
        validate_config(mocov2_cfg(compile=value))
    assert words in str(err.value) and '\n' not in str(err.value)


def test_compile_is_off_by_default():
    for name in ('mocov2_r18_tiny.py', 'mocov2_r18_tiny_fast.py', 'mixco_r18_tiny_fast.py'):
        assert not Config.fromfile(str(ROOT / 'configs' / name)).get('compile')


@pytest.mark.parametrize('name, base', [('mocov2_r18_tiny_fast.py', 'mocov2_r18_tiny.py'),
                                        ('mixco_r18_tiny_fast.py', 'mixco_r18_tiny.py')])
def test_fast_configs_differ_from_paper_configs_only_in_the_switches(name, base):
    fast = Config.fromfile(str(ROOT / 'configs' / name)).to_dict()
    paper = Config.fromfile(str(ROOT / 'configs' / base)).to_dict()
    validate_config(Config(fast))
    assert fast.pop('optim_wrapper') == dict(paper.pop('optim_wrapper'),
                                             type='CPUCapableAmpOptimWrapper', dtype='bfloat16',
                                             loss_scale=dict(enabled=False))
    assert fast.pop('custom_hooks') == paper.pop('custom_hooks') + [dict(type='ChannelsLastHook')]
    assert fast['train_dataloader']['dataset'].pop('view') == 'raw_uint8'
    assert paper['train_dataloader']['dataset'].pop('view') == dict(name='mocov2')
    assert fast['model'].pop('data_preprocessor') == dict(type='GPUViewPreprocessor', view='mocov2')
    assert fast == paper

