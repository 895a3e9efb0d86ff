"""benchmark.harness.speed.step: the family table, its configs, and a step of each member."""
import pytest
import torch

from benchmark.harness.speed.step import (FAMILY, METHODS, PAIRS, build_step, model_cfg,
                                          step_inputs, train_step)
from benchmark.harness.speed.floor import ENCODER_IMAGES
from benchmark.harness.speed.timing import Settings
from benchmark.layout import REPO_ROOT
from benchmark.names import METHOD_NAMES


def test_family_pairs_each_member_with_its_baseline():
    assert PAIRS == {'mixco_moco': ('mixco', 'mocov2'), 'imix_moco': ('imix', 'mocov2'),
                     'unmix_moco': ('unmix', 'mocov2'), 'mochi_moco': ('mochi', 'mocov2'),
                     'mixco_simclr': ('mixco_simclr', 'simclr')}
    assert METHODS['unmix'] == 'Un-Mix (MoCo-v2)' and tuple(METHODS) == FAMILY


def test_the_family_is_every_self_supervised_method_with_its_config_and_pass_count():
    """A method added to benchmark/names.py METHODS joins the family: the harness times its
    configs/<name>_r18_tiny.py, and the floor needs its row of the counting model."""
    assert FAMILY[:2] == ('mocov2', 'mixco') and 'supervised' not in FAMILY
    assert set(FAMILY) == set(METHOD_NAMES.values()) - {'supervised'}
    missing = [f'{m}: no configs/{m}_r18_tiny.py for the speed harness to time' for m in FAMILY
               if not (REPO_ROOT / 'configs' / f'{m}_r18_tiny.py').is_file()]
    missing += [f'{m}: no row in benchmark/harness/speed/floor.py ENCODER_IMAGES (images with '
                'and without gradient per source image)' for m in FAMILY if m not in ENCODER_IMAGES]
    assert not missing, '\n'.join(missing)


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
