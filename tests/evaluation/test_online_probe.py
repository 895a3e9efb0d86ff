"""OnlineLinearProbeHook: the head's SGD step in closed form, which features it reads, and on a
real MixCo run: training is bit-identical with and without it (and the control: without its
RNG guard it is not), its accuracy is logged each epoch, recorded, and survives a checkpoint."""
import json
import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.runner import Runner
from torch import nn

import benchmark.components  # noqa: F401  registers the hooks, Digits and the models
from benchmark.engine.launch import load_config
from benchmark.evaluation import online_probe
from benchmark.evaluation.evaluate import online_results
from benchmark.evaluation.features import extract_features
from benchmark.evaluation.online_probe import OnlineLinearProbeHook, FeatureTap, probe_step
from benchmark.evaluation.topk import topk_accuracy
from tests.conftest import ROOT


def test_probe_step_from_zero_is_the_closed_form_sgd_step():
    """From W = 0 the logits are 0, softmax is uniform: grad W = (1/C - onehot)^T x / B."""
    torch.manual_seed(0)
    feats, labels = torch.randn(6, 4, dtype=torch.float64), torch.tensor([0, 2, 1, 2, 0, 1])
    head = nn.Linear(4, 3).double()
    nn.init.zeros_(head.weight)
    nn.init.zeros_(head.bias)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.5, momentum=0.9)
    loss = probe_step(head, optimizer, feats, labels)
    residual = torch.full((6, 3), 1 / 3, dtype=torch.float64) - F.one_hot(labels, 3)  # (B, C)
    torch.testing.assert_close(head.weight.data, -0.5 * residual.t() @ feats / 6)
    torch.testing.assert_close(head.bias.data, -0.5 * residual.mean(0))
    assert loss.item() == pytest.approx(torch.log(torch.tensor(3.0)).item())


def _backbone():
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten())


def test_tap_reads_the_first_view_rows_of_the_first_pass():
    """MixCo's joint pass cat(x_q, x_mix): the first B rows; another input: nothing caught."""
    backbone, tap = _backbone(), FeatureTap()
    backbone.register_forward_hook(tap.after_backbone)
    view, other = torch.randn(4, 3, 8, 8), torch.randn(2, 3, 8, 8)
    tap.after_preprocess(nn.Identity(), None, dict(inputs=[view, other], data_samples=torch.arange(4)))
    out = backbone(torch.cat([view, other]))
    torch.testing.assert_close(tap.features, out[:4].detach())
    assert not tap.features.requires_grad and tap.labels.tolist() == [0, 1, 2, 3]
    tap.after_preprocess(nn.Identity(), None, dict(inputs=[view, other], data_samples=torch.arange(4)))
    backbone(other.repeat(2, 1, 1, 1))  # i-Mix: only mixed images pass through
    assert tap.features is None and tap.view is view  # the hook falls back to its own pass


def test_bad_arguments_fail_in_one_line_naming_the_argument():
    for kwargs, words in [(dict(lr=0), 'lr must be > 0, got 0'),
                          (dict(momentum=1), 'momentum must be in [0, 1), got 1'),
                          (dict(num_test=0), 'num_test must be >= 1 or None, got 0'),
                          (dict(seed=2 ** 32), 'seed must be in [0, 2**32)')]:
        with pytest.raises(ValueError, match=re.escape(f'OnlineLinearProbeHook: {words}')):
            OnlineLinearProbeHook(**kwargs)


def _cfg(tmp_path, probe: bool) -> Config:
    cfg = load_config(str(ROOT / 'configs/mixco_r18_digits.py'))
    cfg.merge_from_dict({'train_dataloader.batch_size': 8, 'train_dataloader.num_workers': 0,
                         'train_dataloader.persistent_workers': False,
                         'train_dataloader.num_batch_per_epoch': 2,
                         'train_cfg.max_epochs': 2, 'model.queue_size': 32,
                         'default_hooks.checkpoint.interval': 100,
                         'default_hooks.checkpoint.save_last': False,
                         'default_hooks.checkpoint.iter_interval': 0})
    cfg.custom_hooks = [dict(type='RunInfoHook')] + (
        [dict(type='OnlineLinearProbeHook', num_test=40, batch_size=40)] if probe else [])
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend')]
    cfg.work_dir, cfg.log_level = str(tmp_path / ('probe' if probe else 'plain')), 'WARNING'
    # mmengine names the run (and its global Visualizer instance) by the second it starts; two
    # runs started within one second in one process would share the first one's log folder.
    cfg.experiment_name = f"{'probe' if probe else 'plain'}-{tmp_path.name}"
    return cfg


def _train(tmp_path, probe: bool):
    runner = Runner.from_cfg(_cfg(tmp_path, probe))
    runner.train()
    return runner, {k: v.clone() for k, v in runner.model.state_dict().items()}


def test_training_is_bit_identical_with_the_probe(tmp_path, monkeypatch, tiny_backbones):
    """MixCo draws its lambdas from the global generator, so any draw of the probe (the val
    loader's base seed) would change the weights after the first epoch's validation."""
    _, plain = _train(tmp_path, probe=False)
    runner, probed = _train(tmp_path, probe=True)
    assert plain.keys() == probed.keys()
    assert all(torch.equal(plain[k], probed[k]) for k in plain)
    hook = next(h for h in runner.hooks if isinstance(h, OnlineLinearProbeHook))
    # Logged every epoch, with step = epochs done; equal to the head on the val features.
    rows = [json.loads(line) for line in next(
        (tmp_path / 'probe').glob('*/vis_data/scalars.json')).read_text().splitlines()]
    assert [r['step'] for r in rows if 'online_linear/top1' in r] == [1, 2]
    feats, labels = extract_features(runner.model.backbone, hook.val_subset(runner.cfg), progress=False)
    expected = topk_accuracy(hook.head(feats).detach(), labels)
    assert rows[-1]['online_linear/top1'] == expected['top1'] == hook.last['top1']
    name, entry = hook.online_protocol()
    assert name == 'online_linear' and entry['metrics'] == expected
    assert online_results(runner) == {'online_linear': entry}
    assert hook.head.weight.abs().sum() > 0  # it did learn something
    # The control: without the RNG guard the run's draws change.
    monkeypatch.setattr(online_probe, 'restore_rng_state', lambda state: None)
    _, unguarded = _train(tmp_path / 'control', probe=True)
    assert not all(torch.equal(plain[k], unguarded[k]) for k in plain)


def test_head_travels_in_the_checkpoint():
    hook, other = OnlineLinearProbeHook(), OnlineLinearProbeHook()
    model = SimpleNamespace(backbone=SimpleNamespace(feature_dim=3))
    for h in (hook, other):
        h.head = nn.Linear(3, 2)
        h.optimizer = torch.optim.SGD(h.head.parameters(), lr=0.1, momentum=0.9)
    probe_step(hook.head, hook.optimizer, torch.randn(4, 3), torch.tensor([0, 1, 1, 0]))
    hook.last = dict(top1=50.0, top5=100.0, epoch=3)
    checkpoint = {}
    hook.before_save_checkpoint(SimpleNamespace(model=model), checkpoint)
    other.after_load_checkpoint(None, checkpoint)
    assert torch.equal(other.head.weight, hook.head.weight) and other.last == hook.last
    assert other.optimizer.state_dict()['state'][0]['momentum_buffer'].abs().sum() > 0


def test_probe_step_equals_autograds_step():
    """The written-out gradient against autograd's, through two momentum steps with weight
    decay, in float64: the same head to rounding."""
    torch.manual_seed(3)
    heads = [nn.Linear(5, 4).double() for _ in range(2)]
    heads[1].load_state_dict(heads[0].state_dict())
    opts = [torch.optim.SGD(h.parameters(), lr=0.3, momentum=0.9, weight_decay=1e-3)
            for h in heads]
    for _ in range(2):
        feats, labels = torch.randn(6, 5, dtype=torch.float64), torch.randint(4, (6,))
        loss = probe_step(heads[0], opts[0], feats, labels)
        reference = F.cross_entropy(heads[1](feats), labels)
        opts[1].zero_grad()
        reference.backward()
        opts[1].step()
        torch.testing.assert_close(loss, reference.detach())
    for a, b in zip(heads[0].parameters(), heads[1].parameters()):
        torch.testing.assert_close(a, b)
