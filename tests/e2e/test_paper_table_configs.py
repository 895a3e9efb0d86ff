"""Configs of the paper's Tables 5 (ResNet-50 ImageNet) and 6 (ResNet-18, 200/400 epochs):
hyperparameters as the paper and the authors' scripts state them, and one tiny training step of
each ImageNet config on generated data (the 200/400-epoch configs equal the 100-epoch ones but
for max_epochs, which the step overrides)."""
import json
import math

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import MODELS

import benchmark.data  # noqa: F401  registers the datasets
import methods  # noqa: F401  registers the models
from benchmark.engine.config.check import validate_config
from benchmark.data.fakes import make_fake_image_folder
from tests.conftest import ROOT
from tools import train as train_tool

IMAGENET = ['mocov2_r50_imagenet.py', 'mixco_r50_imagenet.py']
LONGER = [f'{m}_r18_tiny_{e}e.py' for e in (200, 400) for m in ('mocov2', 'mixco')]


def load(name: str) -> Config:
    return Config.fromfile(str(ROOT / 'configs' / name))


def test_linear_config_builds_a_resnet50_probe():
    """The pretraining configs validate and build in tests/engine/config/test_config_check.py
    and tests/test_configs.py; the ImageNet linear protocol's probe is a ResNet-50."""
    cfg = load('eval/linear_r50_imagenet.py')
    validate_config(cfg)
    assert MODELS.build(cfg.model).backbone.feature_dim == 2048


@pytest.mark.parametrize('name', IMAGENET)
def test_table5_pretraining(name):
    """Authors' exp_*_res50_imagenet.sh: 8 x 32 = 256, lr 0.03, 200 epochs, tau_mix 1."""
    cfg = load(name)
    loader, model, opt = cfg.train_dataloader, cfg.model, cfg.optim_wrapper.optimizer
    assert (loader.batch_size, loader.drop_last, loader.dataset.input_size) == (32, True, 224)
    assert (loader.dataset.type, loader.dataset.view) == ('ImageNet', dict(name='mocov2'))
    assert (opt.lr, opt.momentum, opt.weight_decay) == (0.03, 0.9, 1e-4)
    assert cfg.auto_scale_lr == dict(enable=True, base_batch_size=256)
    assert cfg.train_cfg.max_epochs == 200 and cfg.param_scheduler[0].type == 'CosineAnnealingLR'
    assert model.backbone == dict(depth=50, small_stem=False)
    assert (model.queue_size, model.key_momentum, model.temperature, model.feature_dim) == \
        (65536, 0.999, 0.2, 128)
    if name.startswith('mixco'):
        assert (model.type, model.mix_temperature, model.mix_weight) == ('MixCoMoCo', 1.0, 1.0)


@pytest.mark.parametrize('name', LONGER)
def test_table6_longer_epochs(name):
    """Only the epochs differ from the 100-epoch paper configs."""
    epochs = int(name.split('_')[-1][:-4])
    cfg, base = load(name).to_dict(), load(name.replace(f'_{epochs}e', '')).to_dict()
    assert cfg.pop('train_cfg')['max_epochs'] == epochs
    base.pop('train_cfg')
    assert cfg == base


@pytest.mark.parametrize('mixco, base', [('mixco_r50_imagenet.py', 'mocov2_r50_imagenet.py'),
                                          ('mixco_r18_tiny_200e.py', 'mocov2_r18_tiny_200e.py'),
                                          ('mixco_r18_tiny_400e.py', 'mocov2_r18_tiny_400e.py')])
def test_mixco_differs_from_its_baseline_only_in_mixco_fields(mixco, base):
    a, b = load(mixco).to_dict(), load(base).to_dict()
    model_a, model_b = a.pop('model'), b.pop('model')
    assert a == b
    assert {k for k in model_a if model_b.get(k) != model_a[k]} == {
        'type', 'mix_temperature', 'mix_weight'}


def test_table5_linear_eval():
    """Authors' lincls for ImageNet: lr 30, 100 epochs, x0.1 at 60/80, wd 0, batch 256."""
    cfg = load('eval/linear_r50_imagenet.py')
    opt, (sched,) = cfg.optim_wrapper.optimizer, cfg.param_scheduler
    assert (opt.lr, opt.momentum, opt.weight_decay) == (30.0, 0.9, 0.0)
    assert (sched.type, list(sched.milestones), cfg.train_cfg.max_epochs) == \
        ('MultiStepLR', [60, 80], 100)
    assert (cfg.model.num_classes, cfg.model.backbone.depth) == (1000, 50)
    for loader, split, view in ((cfg.train_dataloader, 'train', 'linear_train'),
                                (cfg.val_dataloader, 'val', 'test')):
        assert (loader.dataset.type, loader.dataset.split, loader.dataset.view) == \
            ('ImageNet', split, view)
    assert cfg.train_dataloader.batch_size == 256


# ----------------------------------------------------------------------------- tiny runs
STEP = ['train_dataloader.batch_size=4', 'train_dataloader.dataset.input_size=32',
        'train_cfg.max_epochs=1', 'model.queue_size=64', 'model.backbone.width=0.25',
        'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False', 'default_hooks.logger.interval=1']


@pytest.fixture(scope='module')
def fake_roots(tmp_path_factory):
    """4 training images (one step of batch 4) of a fake ImageNet."""
    root = tmp_path_factory.mktemp('tables')
    return {'imagenet': make_fake_image_folder(root / 'imagenet', classes=('a', 'b'),
                                               per_class=2, size=40)}


@pytest.mark.parametrize('name', IMAGENET)
def test_one_training_step(name, fake_roots, tmp_path, run_main):
    """tools/train.py (in-process, through its main) runs one step of the config (shrunk by
    --cfg-options: its layers at a quarter width) and saves it."""
    data = fake_roots['imagenet']
    code, _, err, _ = run_main(train_tool, f'configs/{name}', '--work-dir', tmp_path, '--no-eval',
                               '--cfg-options', f'train_dataloader.dataset.data_root={data}',
                               *STEP)
    assert code == 0, err[-3000:]
    assert (tmp_path / 'epoch_1.pth').is_file()
    scalars = next(tmp_path.glob('*/vis_data/scalars.json')).read_text().splitlines()
    rows = [json.loads(line) for line in scalars if '"loss"' in line]
    assert len(rows) == 1 and math.isfinite(rows[0]['loss']) and rows[0]['iter'] == 1
    assert ('loss_mix' in rows[0]) == name.startswith('mixco')


def test_linear_eval_one_epoch(fake_roots, tmp_path, monkeypatch):
    """The ImageNet linear protocol, shrunk to one epoch of one step, on a random ResNet-50."""
    from benchmark.evaluation.linear_paper import run_linear_paper
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    options = {'train_cfg.max_epochs': 1, 'train_dataloader.batch_size': 4,
               'train_dataloader.dataset.input_size': 32, 'model.num_classes': 2,
               'train_dataloader.num_workers': 0, 'train_dataloader.persistent_workers': False,
               'val_dataloader.num_workers': 0, 'val_dataloader.persistent_workers': False}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run_linear_paper(str(ROOT / 'configs/eval/linear_r50_imagenet.py'), None,
                                  dict(depth=50, small_stem=False), fake_roots['imagenet'],
                                  str(tmp_path), options)
    finally:
        torch.set_num_threads(threads)
    assert 0 <= result['metrics']['top1'] <= 100
    assert result['settings']['lr_effective'] == pytest.approx(30.0 * 4 / 256)
