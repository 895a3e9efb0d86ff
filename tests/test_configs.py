"""Every config loads, builds its model on CPU, follows the naming rule and the contracts."""
import re
from pathlib import Path

import pytest
from mmengine.config import Config
from mmengine.registry import DATASETS, MODELS

import benchmark.data  # noqa: F401
import methods  # noqa: F401
from benchmark.engine.config.views import fill_view_size
from tests.conftest import ROOT

CONFIGS = sorted(p for p in (ROOT / 'configs').glob('*.py'))
# _<epochs>e: a longer schedule than the paper's default for that backbone (Table 6).
NAME = re.compile(r'^(mocov2|mixco|simclr|mixco_simclr|supervised|imix|unmix|mochi)_r(18|34|50)'
                  r'_(tiny|digits|imagenet)(_\d+e|_fast)?\.py$')
PAPER = {p for p in CONFIGS if p.name.endswith('_tiny.py')}


def test_configs_exist():
    """The paper's 5 methods x 3 backbones, the 3 MixCo siblings on R18, the demo configs."""
    assert len(PAPER) == 18 and len(CONFIGS) >= 23


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.name)
def test_config_name_follows_convention(path: Path):
    """{method}_{backbone}_{data}.py, or {method}_{backbone}_{data}_fast.py (speed switches on)."""
    assert NAME.match(path.name), path.name


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.name)
def test_config_builds_model_on_cpu(path: Path):
    """The model and its dataset type resolve in the registries; the model builds on CPU."""
    cfg = Config.fromfile(str(path))
    fill_view_size(cfg)  # as every tool does: device views take the dataset's input_size
    if 'queue_size' in cfg.model:
        cfg.model.queue_size = 256  # keep memory small; the contract allows overriding it
    model = MODELS.build(cfg.model)
    assert model.backbone.feature_dim in (512, 2048)
    assert DATASETS.get(cfg.train_dataloader.dataset.type) is not None


@pytest.mark.parametrize('path', sorted(PAPER), ids=lambda p: p.name)
def test_paper_hyperparameters(path: Path):
    """DESIGN.md's setting: batch 64 per process (128 on 2 GPUs), 224 px, epochs, lr, tau."""
    cfg = Config.fromfile(str(path))
    depth = int(re.search(r'_r(\d+)_', path.name).group(1))
    assert cfg.train_dataloader.batch_size == 64
    assert cfg.train_dataloader.dataset.input_size == 224
    assert cfg.model.backbone == dict(depth=depth, small_stem=False)
    assert cfg.train_cfg.max_epochs == (100 if depth == 18 else 200)
    assert cfg.auto_scale_lr == dict(enable=True, base_batch_size=128)
    opt = cfg.optim_wrapper.optimizer
    kind = cfg.model.type
    # The authors' SimCLR keeps its argparse default weight decay 1e-6; MoCo's is 1e-4.
    assert (opt.momentum, opt.weight_decay) == (0.9, 1e-6 if 'SimCLR' in kind else 1e-4)
    if kind in ('MoCo', 'MixCoMoCo', 'IMixMoCo', 'UnMixMoCo', 'MoCHiMoCo'):
        assert opt.lr == 0.015 and cfg.model.temperature == 0.2
        assert (cfg.model.queue_size, cfg.model.key_momentum, cfg.model.feature_dim) == (65536, 0.999, 128)
    if kind in ('SimCLR', 'MixCoSimCLR'):
        assert opt.lr == 0.15 and cfg.model.temperature == 0.5
        assert cfg.train_dataloader.dataset.view == dict(name='simclr', min_scale=0.2)
        assert (cfg.model.joint_forward, cfg.model.head_batch_norm, cfg.model.gather_negatives,
                cfg.model.sync_bn) == (False, False, False, True)  # the authors' SimCLR
    if kind == 'MixCoMoCo':
        assert (cfg.model.mix_temperature, cfg.model.mix_weight) == (0.05, 1.0)
    if kind == 'MixCoSimCLR':
        assert (cfg.model.mix_temperature, cfg.model.mix_weight) == (0.5, 1.0)


@pytest.mark.parametrize('mixco, base', [('mixco_r18_tiny.py', 'mocov2_r18_tiny.py'),
                                          ('mixco_r50_tiny.py', 'mocov2_r50_tiny.py'),
                                          ('mixco_simclr_r18_tiny.py', 'simclr_r18_tiny.py'),
                                          ('mixco_r18_digits.py', 'mocov2_r18_digits.py'),
                                          ('mixco_r18_tiny_fast.py', 'mocov2_r18_tiny_fast.py')])
def test_mixco_differs_only_in_mixco_fields(mixco: str, base: str):
    """A MixCo config equals its baseline except the model's type and mix_* fields."""
    a = Config.fromfile(str(ROOT / 'configs' / mixco)).to_dict()
    b = Config.fromfile(str(ROOT / 'configs' / base)).to_dict()
    model_a, model_b = a.pop('model'), b.pop('model')
    assert a == b
    extra = {k for k in model_a if k not in model_b or model_a[k] != model_b[k]}
    assert extra == {'type'} | {k for k in model_a if k.startswith('mix_')}


def test_cfg_options_contract():
    """The --cfg-options keys of DESIGN.md's contract reach the right places."""
    cfg = Config.fromfile(str(ROOT / 'configs/mixco_r18_tiny.py'))
    cfg.merge_from_dict({'train_dataloader.batch_size': 8, 'train_dataloader.dataset.data_root': '/d',
                         'train_dataloader.dataset.input_size': 32, 'train_cfg.max_epochs': 1,
                         'model.queue_size': 64, 'randomness.seed': 7, 'work_dir': '/w'})
    assert cfg.train_dataloader.batch_size == 8 and cfg.train_cfg.max_epochs == 1
    assert cfg.train_dataloader.dataset.data_root == '/d'
    assert cfg.train_dataloader.dataset.input_size == 32
    assert cfg.model.queue_size == 64 and cfg.randomness.seed == 7 and cfg.work_dir == '/w'
    assert 'end' not in cfg.param_scheduler[0]  # cosine follows train_cfg.max_epochs
