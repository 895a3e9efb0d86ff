"""benchmark.harness.speed.step: the family table, its configs, and a step of each member."""
import pytest
import torch

from benchmark.harness.speed.step import (FAMILY, METHODS, PAIRS, build_step, method_config,
                                          model_cfg, step_inputs, train_step)
from benchmark.harness.speed.timing import Settings
from benchmark.names import METHOD_NAMES


def test_family_pairs_each_member_with_its_baseline():
    assert PAIRS == {'mixco_moco': ('mixco', 'mocov2'), 'imix_moco': ('imix', 'mocov2'),
                     'unmix_moco': ('unmix', 'mocov2'), 'mochi_moco': ('mochi', 'mocov2'),
                     'mixco_simclr': ('mixco_simclr', 'simclr')}
    assert METHODS['unmix'] == 'Un-Mix (MoCo-v2)' and tuple(METHODS) == FAMILY


def test_the_family_is_every_self_supervised_method_each_timed_with_its_config():
    """A method added to benchmark/names.py METHODS joins the family: the harness times its
    Tiny-ImageNet config, else its first config (a new method's digits config)."""
    assert FAMILY[:2] == ('mocov2', 'mixco') and 'supervised' not in FAMILY
    assert set(FAMILY) == set(METHOD_NAMES.values()) - {'supervised'}
    assert {m: METHOD_NAMES[model_cfg(m, Settings()).model.type] for m in FAMILY} == {
        m: m for m in FAMILY}
    assert method_config('mixco', 34).name == 'mixco_r34_tiny.py'
    assert method_config('mixco', 101).name == 'mixco_r18_tiny.py'  # no ResNet-101 config


def test_a_method_without_a_tiny_imagenet_config_is_timed_with_its_first(tmp_path):
    for name in ('mixco_r18_digits.py', 'mixco_r18_cifar10.py', 'mixco_simclr_r18_tiny.py'):
        (tmp_path / name).write_text('')
    assert method_config('mixco', 18, tmp_path).name == 'mixco_r18_cifar10.py'
    with pytest.raises(FileNotFoundError, match='supervised: no configs/supervised_r<depth>_'):
        method_config('supervised', 18, tmp_path)


def test_model_cfg_takes_the_backbone_and_times_mochi_mixing():
    cfg = model_cfg('mochi', Settings(depth=34, small_stem=True))
    assert cfg.model.backbone == dict(depth=34, small_stem=True)
    assert cfg.model.type == 'MoCHiMoCo' and cfg.model.mix_warmup_epochs == 0
    assert 'mix_warmup_epochs' not in model_cfg('mixco', Settings()).model


@pytest.mark.parametrize('method', ['imix', 'unmix', 'mochi'])
def test_a_step_of_each_new_member_updates_the_weights(method):
    s = Settings(input_size=16, batch=4, small_stem=True)
    model, opt = build_step(method, s, torch.device('cpu'))
    before = model.backbone.conv1.weight.detach().clone()
    train_step(model, opt, step_inputs([torch.randn(4, 3, 16, 16) for _ in range(2)], s))
    assert not torch.equal(model.backbone.conv1.weight, before)
    if method == 'mochi':
        assert model.mixing()  # the measured step mixes hard negatives
