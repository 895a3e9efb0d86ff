"""KNNMonitorHook: fixed subset, when it runs, what it logs, and a real one-epoch Runner."""
import json
import re
import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.logging import MessageHub
from mmengine.model import BaseModel
from mmengine.registry import MODELS
from mmengine.runner import Runner
from torch import nn

import benchmark.data  # noqa: F401  registers Digits
import methods  # noqa: F401
from benchmark.engine.tracking import configure_wandb
from benchmark.evaluation.features import extract_features
from benchmark.evaluation.knn import knn_predict
from benchmark.evaluation.knn_monitor import KNNMonitorHook
from benchmark.evaluation.monitor import fixed_subset
from benchmark.evaluation.topk import topk_accuracy
from tests.conftest import ROOT

DIGITS = dict(type='Digits', data_root='', split='train', input_size=16, view='mocov2')


def digits_cfg() -> Config:
    return Config(dict(train_dataloader=dict(dataset=DIGITS)))


class Recorder:
    """Stands in for the visualizer: keeps every add_scalars call."""

    def __init__(self):
        self.calls = []

    def add_scalars(self, scalars, step=0, **kwargs):
        self.calls.append((dict(scalars), step))


def fake_runner(epoch: int, max_epochs: int = 4) -> SimpleNamespace:
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return SimpleNamespace(cfg=digits_cfg(), model=SimpleNamespace(backbone=backbone),
                           epoch=epoch, max_epochs=max_epochs, visualizer=Recorder(),
                           message_hub=MessageHub.get_instance('test_knn_monitor'),
                           logger=logging.getLogger('test_knn_monitor'))


def test_subset_is_fixed_by_the_seed():
    """Same seed, same images (also after a restart); another seed, other images."""
    def indices(seed):
        subsets = KNNMonitorHook(num_train=100, num_test=50, seed=seed).subsets(digits_cfg())
        return subsets['train'].indices, subsets['val'].indices

    train, val = indices(0)
    assert (len(train), len(val)) == (100, 50)
    assert train == sorted(set(train)) and max(train) < 1437 and max(val) < 360
    assert indices(0) == (train, val)
    assert indices(1)[0] != train
    # More than the split holds: the whole split, each image once.
    assert fixed_subset(np.random.default_rng(0), 7, 100).tolist() == list(range(7))


def test_subset_uses_the_test_view_of_the_pretraining_data():
    subsets = KNNMonitorHook(num_train=5, num_test=5).subsets(digits_cfg())
    image = subsets['train'][0]['inputs']
    assert image.shape == (3, 16, 16)  # train config's input_size, deterministic view
    torch.testing.assert_close(image, subsets['train'][0]['inputs'])


@pytest.mark.parametrize('epoch, runs', [(0, False), (1, True), (2, False), (3, True)])
def test_runs_every_interval_and_after_the_last_epoch(epoch, runs):
    """interval=2, 4 epochs: after epochs 2 and 4 (runner.epoch 1 and 3); step = epochs done."""
    hook, runner = KNNMonitorHook(interval=2, num_train=60, num_test=30), fake_runner(epoch)
    hook.after_train_epoch(runner)
    assert [step for _, step in runner.visualizer.calls] == ([epoch + 1] if runs else [])
    odd_last = fake_runner(epoch, max_epochs=epoch + 1)  # the last epoch, whatever the interval
    hook.after_train_epoch(odd_last)
    assert len(odd_last.visualizer.calls) == 1


def test_logged_accuracy_is_the_knn_of_the_subset_and_train_mode_is_back():
    """The hook's numbers equal knn_predict on the subset's features computed by hand."""
    hook, runner = KNNMonitorHook(num_train=200, num_test=80, k=20), fake_runner(epoch=0)
    scalars = hook.evaluate(runner)
    assert runner.model.backbone.training
    subsets = hook.subsets(runner.cfg)
    bank, bank_labels = extract_features(runner.model.backbone, subsets['train'], progress=False)
    queries, labels = extract_features(runner.model.backbone, subsets['val'], progress=False)
    expected = topk_accuracy(knn_predict(bank, bank_labels, queries, 10, k=20), labels)
    assert scalars == {'knn_monitor/top1': expected['top1'], 'knn_monitor/top5': expected['top5']}
    assert runner.visualizer.calls == [(scalars, 1)]
    assert runner.message_hub.get_scalar('knn_monitor/top1').current() == expected['top1']
    assert 0 <= expected['top1'] <= expected['top5'] <= 100


def test_default_k_is_the_protocol_rule_on_the_bank(monkeypatch):
    """Without k the monitor votes with the kNN protocol's k for its bank (200 digits images,
    about 20 per class: a k of 7 or 8), not InstDisc's 200, which is all of the bank."""
    from benchmark.evaluation import knn_monitor
    from benchmark.evaluation.knn import knn_k_for
    seen = []
    monkeypatch.setattr(knn_monitor, 'knn_predict',
                        lambda *a, **kw: seen.append(a[4]) or knn_predict(*a, **kw))
    hook, runner = KNNMonitorHook(num_train=200, num_test=80), fake_runner(epoch=0)
    hook.evaluate(runner)
    _, bank_labels = extract_features(runner.model.backbone, hook.subsets(runner.cfg)['train'],
                                      progress=False)
    assert seen == [knn_k_for(bank_labels)] and 1 <= seen[0] < 20


def test_bad_arguments_fail_in_one_line_naming_the_argument():
    for kwargs, words in [(dict(interval=0), 'interval must be >= 1, got 0'),
                          (dict(k=0), 'k must be None or >= 1, got 0'),
                          (dict(temperature=0), 'temperature must be > 0, got 0'),
                          (dict(num_workers=-1), 'num_workers must be >= 0, got -1')]:
        with pytest.raises(ValueError, match=re.escape(f'KNNMonitorHook: {words}')):
            KNNMonitorHook(**kwargs)


@MODELS.register_module(force=True)
class TinyClassifier(BaseModel):
    """A few-thousand-parameter stand-in for a method: the hook needs only `.backbone`."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(8, 10)

    def forward(self, inputs, data_samples=None, mode='loss'):
        return dict(loss=F.cross_entropy(self.classifier(self.backbone(inputs)), data_samples))


@pytest.mark.slow
def test_real_runner_writes_knn_monitor_to_scalars_json(tmp_path, monkeypatch):
    """One epoch on digits (16 px, batch 16) with the default runtime's hooks and backends:
    knn_monitor/top1 lands in scalars.json after the last epoch though the interval is longer."""
    monkeypatch.setenv('WANDB_MODE', 'disabled')  # the wandb backend stays, logs nowhere
    cfg = Config.fromfile(str(ROOT / 'configs/mocov2_r18_digits.py'))
    cfg.merge_from_dict({'train_dataloader.batch_size': 16, 'train_dataloader.num_workers': 0,
                         'train_dataloader.persistent_workers': False,
                         'train_dataloader.dataset.input_size': 16,
                         'train_dataloader.dataset.view': 'linear_train',
                         'train_cfg.max_epochs': 1,
                         'default_hooks.checkpoint.interval': 100,
                         'default_hooks.checkpoint.save_last': False})
    cfg.model = dict(type='TinyClassifier')
    monitor = next(h for h in cfg.custom_hooks if h['type'] == 'KNNMonitorHook')
    assert monitor.get('interval', 1) > 1
    monitor.update(num_train=300, num_test=100)
    cfg.work_dir, cfg.log_level = str(tmp_path), 'WARNING'
    cfg.experiment_name = f'knn-monitor-{tmp_path.name}'  # not the second it starts: see test_online_probe
    configure_wandb(cfg)
    runner = Runner.from_cfg(cfg)
    runner.train()
    assert runner.model.backbone.training
    files = list(tmp_path.glob('*/vis_data/scalars.json'))
    rows = [json.loads(line) for line in files[0].read_text().splitlines()]
    knn = [r for r in rows if 'knn_monitor/top1' in r]
    assert len(knn) == 1 and knn[0]['step'] == 1
    assert 0 <= knn[0]['knn_monitor/top1'] <= 100 and 'knn_monitor/top5' in knn[0]
    assert any('loss' in r for r in rows)
