"""The documented way to switch torch.compile on in a config: a config that extends another
and appends CompileHook to the base's hook list loads, passes the config check and registers
the hook (after ChannelsLastHook) as the Runner does."""
import pytest
from mmengine.runner import Runner

import benchmark.components  # noqa: F401  registers the hooks
from benchmark.engine.compile_hook import CompileHook
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import read_config
from tests.conftest import ROOT

RECIPE = "custom_hooks = _base_.custom_hooks + [dict(type='CompileHook')]\n"


class HookList:
    """The Runner's hook registration (priority order), without building a Runner."""

    register_hook = Runner.register_hook
    register_custom_hooks = Runner.register_custom_hooks

    def __init__(self):
        self._hooks = []


def write_config(tmp_path, base: str, body: str) -> str:
    path = tmp_path / 'with_compile.py'
    path.write_text(f"_base_ = ['{ROOT / 'configs' / base}']\n{body}")
    return str(path)


@pytest.mark.parametrize('base', ['mocov2_r18_tiny_fast.py', 'mixco_r18_digits.py'])
def test_appending_to_the_base_hooks_registers_compile_hook(tmp_path, base):
    cfg = read_config(write_config(tmp_path, base, RECIPE))
    validate_config(cfg)
    inherited = [h['type'] for h in read_config(str(ROOT / 'configs' / base)).custom_hooks]
    assert [h['type'] for h in cfg.custom_hooks] == [*inherited, 'CompileHook']
    hooks = HookList()
    hooks.register_custom_hooks(cfg.custom_hooks)
    names = [type(h).__name__ for h in hooks._hooks]
    assert sum(isinstance(h, CompileHook) for h in hooks._hooks) == 1
    if 'ChannelsLastHook' in names:  # compiled after the weights are NHWC
        assert names.index('ChannelsLastHook') < names.index('CompileHook')


def test_the_augmented_assignment_fails_to_load(tmp_path):
    """Why the recipe reads the base's list: a config file's own names do not include the
    base's keys, so `custom_hooks += [...]` is a NameError."""
    path = write_config(tmp_path, 'mixco_r18_digits.py',
                        "custom_hooks += [dict(type='CompileHook')]\n")
    with pytest.raises(ConfigError, match="NameError: name 'custom_hooks' is not defined"):
        read_config(path)
