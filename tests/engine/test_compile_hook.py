"""benchmark.engine.compile_hook: torch.compile of the encoders in place (names unchanged)."""
from types import SimpleNamespace

import pytest
import torch
from mmengine.hooks import Hook

from benchmark.engine.compile_hook import CompileHook, compile_encoders
from tests.engine.test_fast_switches import tiny_moco


@pytest.mark.slow
def test_compile_encoders_compiles_each_resnet_once_and_keeps_names_and_outputs():
    ref, model = tiny_moco(), tiny_moco()
    keys = list(model.state_dict())
    names = compile_encoders(model, backend='eager')  # the mechanism, without inductor's minutes
    assert 'backbone' in names and len(names) == 2  # query and key encoders
    assert all(getattr(m, '_compiled_call_impl', None) is not None
               for n, m in model.named_modules() if n in names)
    assert compile_encoders(model, backend='eager') == names  # again: nothing more
    assert list(model.state_dict()) == keys  # checkpoints and resume see the same names
    x = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(model(inputs=[x], mode='tensor'), ref(inputs=[x], mode='tensor'))


def test_hook_runs_after_channels_last_and_refuses_a_model_without_resnet():
    from benchmark.engine.channels_last import ChannelsLastHook
    from mmengine.runner.priority import get_priority
    assert get_priority(CompileHook.priority) > get_priority(ChannelsLastHook.priority)
    hook = CompileHook(backend='eager', mode=None)
    assert hook.kwargs == dict(fullgraph=False, backend='eager') and isinstance(hook, Hook)
    runner = SimpleNamespace(model=torch.nn.Linear(2, 2), logger=SimpleNamespace(info=print))
    with pytest.raises(ValueError, match='no ResNet encoder'):
        hook.before_run(runner)
    model = tiny_moco()
    hook.before_run(SimpleNamespace(model=model, logger=SimpleNamespace(info=print)))
    assert model.backbone._compiled_call_impl is not None
