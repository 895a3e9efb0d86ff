"""The paper's linear protocol: frozen encoder in eval mode, strict loading, configs, a tiny run."""
import math
import re
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DATASETS, MODELS
from torchvision.models import resnet18

import benchmark.data  # noqa: F401
import methods  # noqa: F401
from benchmark.engine.checkpoints import CheckpointMismatchError
from benchmark.engine.compat import allow_mmengine_checkpoints
from benchmark.evaluation.linear_metric import LinearAccuracy
from benchmark.evaluation.linear_paper import (
    default_linear_config,
    linear_work_dir,
    run_linear_paper,
)
from benchmark.evaluation.linear_probe import LinearProbe
from tests.conftest import CONFIG_DATA, ROOT

EVAL_CONFIGS = sorted((ROOT / 'configs' / 'eval').glob('*.py'))
# linear_r<depth>_<data>.py, the data a dataset of benchmark/names.py (tests/conftest.py)
NAME = re.compile(rf"^linear_r(18|34|50)_({'|'.join(map(re.escape, CONFIG_DATA))})\.py$")
TINY_RUN = {'train_cfg.max_epochs': 2, 'train_dataloader.batch_size': 64,
            'train_dataloader.dataset.input_size': 16,  # the val split follows
            'train_dataloader.num_workers': 0, 'train_dataloader.persistent_workers': False,
            'val_dataloader.num_workers': 0, 'val_dataloader.persistent_workers': False,
            'default_hooks.checkpoint.max_keep_ckpts': 2}


def backbone_state(model: LinearProbe) -> dict:
    return {k: v.clone() for k, v in model.backbone.state_dict().items()}


def test_train_step_leaves_backbone_and_bn_statistics_unchanged():
    """model.train() keeps the backbone in eval mode: one SGD step moves only the head."""
    torch.manual_seed(0)
    model = LinearProbe(num_classes=3, backbone=dict(depth=18, small_stem=True))
    model.train()
    assert model.training and model.head.training and not model.backbone.training
    assert not any(m.training for m in model.backbone.modules())
    assert not any(p.requires_grad for p in model.backbone.parameters())
    before, head_before = backbone_state(model), model.head.weight.detach().clone()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=3.0,
                                momentum=0.9)
    losses = model.loss(torch.randn(4, 3, 16, 16) * 5 + 2, torch.tensor([0, 1, 2, 0]))
    assert set(losses) == {'loss_ce', 'acc_top1'}
    losses['loss_ce'].backward()
    optimizer.step()
    after = model.backbone.state_dict()
    assert any('running_mean' in k for k in after)
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights and BN statistics
    assert not torch.equal(head_before, model.head.weight)
    logits = model(torch.randn(2, 3, 16, 16), mode='predict')
    assert logits.shape == (2, 3)


def test_checkpoint_loads_strictly(tmp_path):
    """A matching checkpoint's weights arrive and survive init_weights; R18 into R50 raises."""
    source = resnet18()
    torch.save(source.state_dict(), tmp_path / 'tv.pth')
    model = LinearProbe(num_classes=5, backbone=dict(depth=18), checkpoint=str(tmp_path / 'tv.pth'))
    assert model.checkpoint_layout == 'torchvision'
    model.init_weights()  # what mmengine's Runner calls before training: must keep the weights
    assert all(torch.equal(v, source.state_dict()[k]) for k, v in model.backbone.state_dict().items())
    with pytest.raises(CheckpointMismatchError, match='missing keys'):
        LinearProbe(num_classes=5, backbone=dict(depth=50), checkpoint=str(tmp_path / 'tv.pth'))


def test_metric_topk_over_batches():
    """Logits handed over row by row, in two batches; top-1 / top-5 in percent over all."""
    logits = torch.randn(10, 7, generator=torch.Generator().manual_seed(0))
    place = torch.tensor([0, 0, 0, 1, 2, 4, 5, 6, 6, 3])  # where each label ranks: 3 top-1, 7 top-5
    labels = logits.argsort(dim=1, descending=True)[torch.arange(10), place]
    metric = LinearAccuracy(topk=(1, 5))
    metric.process(dict(inputs=None, data_samples=labels[:6]), list(logits[:6]))
    metric.process(dict(inputs=None, data_samples=labels[6:]), list(logits[6:]))
    assert metric.compute_metrics(metric.results) == pytest.approx({'top1': 30.0, 'top5': 70.0})


@pytest.mark.parametrize('path', EVAL_CONFIGS, ids=lambda p: p.name)
def test_eval_config_loads_and_builds(path: Path):
    """Every configs/eval/*.py: name rule, registries resolve, the model builds without a ckpt."""
    assert NAME.match(path.name), path.name
    cfg = Config.fromfile(str(path))
    assert cfg.model.checkpoint is None
    model = MODELS.build(cfg.model)
    assert isinstance(model, LinearProbe) and not model.backbone.training
    depth = int(NAME.match(path.name).group(1))
    assert cfg.model.backbone.depth == depth
    for loader, view in ((cfg.train_dataloader, 'linear_train'), (cfg.val_dataloader, 'test')):
        assert DATASETS.get(loader.dataset.type) is not None and loader.dataset.view == view


@pytest.mark.parametrize('name', ['linear_r18_tiny.py', 'linear_r50_tiny.py',
                                  'linear_r18_cifar10.py', 'linear_r18_cifar100.py'])
def test_paper_linear_hyperparameters(name: str):
    """docs/design.md, "The paper's hyperparameters and their sources": 100 epochs, SGD lr 3.0
    m 0.9 wd 0, x0.1 at 60/80, batch 256, 224 px."""
    cfg = Config.fromfile(str(ROOT / 'configs' / 'eval' / name))
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.momentum, opt.weight_decay) == ('SGD', 3.0, 0.9, 0.0)
    assert cfg.train_cfg.max_epochs == 100
    (sched,) = cfg.param_scheduler
    assert (sched.type, list(sched.milestones), sched.gamma) == ('MultiStepLR', [60, 80], 0.1)
    assert cfg.train_dataloader.batch_size == 256
    assert cfg.auto_scale_lr == dict(enable=True, base_batch_size=256)
    assert cfg.train_dataloader.dataset.input_size == cfg.val_dataloader.dataset.input_size == 224
    assert cfg.model.num_classes == {'tiny': 200, 'cifar10': 10, 'cifar100': 100}[
        name[len('linear_r18_'):-3]]


def test_default_config_and_work_dir_names():
    assert default_linear_config('tiny-imagenet').endswith('configs/eval/linear_r18_tiny.py')
    assert Path(default_linear_config('cifar100')).is_file()
    with pytest.raises(ValueError, match='--linear-config'):
        default_linear_config('imagefolder')
    assert linear_work_dir('configs/mixco_r18_tiny.py', 'w/epoch_100.pth',
                           'configs/eval/linear_r18_tiny.py') == \
        'work_dirs/mixco_r18_tiny/linear_r18_tiny_epoch_100'


@pytest.mark.slow
def test_run_on_digits_reports_final_epoch_and_keeps_encoder_frozen(tmp_path, monkeypatch):
    """2 tiny epochs, random init: finite final top-1, checkpoints written, encoder unchanged."""
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny convolutions: extra threads only contend on a shared CPU
    try:
        result = run_linear_paper(str(ROOT / 'configs/eval/linear_r18_digits.py'), None,
                                  dict(depth=18, small_stem=False, width=0.25), None, str(tmp_path),
                                  TINY_RUN)
    finally:
        torch.set_num_threads(threads)
    metrics, settings = result['metrics'], result['settings']
    assert math.isfinite(metrics['top1']) and 0 <= metrics['top1'] <= 100
    assert metrics['top1'] <= metrics['top5'] <= 100
    assert metrics['best_top1_selected_on_test'] >= metrics['top1']
    assert (settings['epochs'], settings['batch'], settings['milestones']) == (2, 64, [6, 8])
    assert settings['lr_effective'] == pytest.approx(3.0 * 64 / 256)
    assert (settings['view'], settings['checkpoint_layout']) == ('linear_train', 'random-init')
    saved = Config.fromfile(str(tmp_path / 'linear_r18_digits.py'))
    assert saved.val_dataloader.dataset.input_size == 16
    allow_mmengine_checkpoints()
    first, last = (torch.load(tmp_path / f'epoch_{e}.pth', map_location='cpu')['state_dict']
                   for e in (1, 2))
    encoder = [k for k in first if k.startswith('backbone.')]
    assert any(k.endswith('running_var') for k in encoder)
    assert all(torch.equal(first[k], last[k]) for k in encoder)  # a whole epoch moved nothing
    assert not torch.equal(first['head.weight'], last['head.weight'])


def test_eval_tool_merges_linear_paper(tmp_path, monkeypatch):
    """`--protocols linear_paper` (tools/eval.py) calls run_linear_paper and records its result."""
    from benchmark.engine.config_file import read_config
    from benchmark.evaluation import evaluate as tool
    from benchmark.evaluation.evaluate import evaluate_checkpoint, record_evaluation
    calls = []

    def fake_run(config, checkpoint, backbone, data_root, work_dir, cfg_options=None):
        calls.append((config, checkpoint, backbone, data_root, work_dir))
        return dict(settings=dict(epochs=100), metrics=dict(top1=12.5, top5=40.0))

    monkeypatch.setattr(tool, 'run_linear_paper', fake_run)
    cfg = read_config('configs/mixco_r18_digits.py')
    out = evaluate_checkpoint(cfg, 'random', ['linear_paper'],
                              work_dir_of='configs/mixco_r18_digits.py')
    record_evaluation(out['protocols'], out['run'], out['eval_data'], str(tmp_path))
    (config, checkpoint, backbone, data_root, work_dir), = calls
    assert config.endswith('configs/eval/linear_r18_digits.py') and checkpoint is None
    assert backbone == dict(depth=18, small_stem=False)
    assert work_dir == 'work_dirs/mixco_r18_digits/linear_r18_digits_random'
    records = list((tmp_path / 'runs').glob('*.json'))
    assert len(records) == 1 and '"linear_paper"' in records[0].read_text()
    # A suite's run keeps its linear probe inside its own work dir (tools/eval.py --work-dir).
    evaluate_checkpoint(cfg, 'random', ['linear_paper'], work_dir_of='configs/mixco_r18_digits.py',
                        work_dir='work_dirs/suites/s/mixco_r18_digits-s1')
    assert calls[-1][4] == 'work_dirs/suites/s/mixco_r18_digits-s1/linear_r18_digits_random'
