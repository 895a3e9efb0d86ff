"""The `supervised` protocol: a supervised model's own classifier on the val split, equal to a
naive float64 loop, the same in two processes, and recorded by evaluate_run for supervised
models only."""
import json
import logging
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config
from torch import nn

import benchmark.data  # noqa: F401  registers Digits
from benchmark.evaluation.supervised import (
    SETTINGS,
    classifier_accuracy,
    eval_split,
    evaluate_classifier,
)
from tests.conftest import tiny_backbone

DIGITS = dict(type='Digits', data_root='', input_size=12)


def tiny_model():
    """A tiny backbone (BN running statistics moved, so eval mode matters) and a 10-class head."""
    torch.manual_seed(0)
    backbone = tiny_backbone()
    backbone[1].running_mean.uniform_(-0.5, 0.5)
    return backbone, nn.Linear(backbone.feature_dim, 10)


def naive_accuracy(backbone: nn.Module, classifier: nn.Linear, dataset) -> dict:
    """Top-1 / top-5 in percent, one val image at a time, logits summed in float64 by hand."""
    backbone.eval()
    weight, bias = classifier.weight.double().tolist(), classifier.bias.double().tolist()
    top1 = top5 = 0
    with torch.no_grad():
        for i in range(len(dataset)):
            sample = dataset[i]
            feats = backbone(sample['inputs'][None])[0].double().tolist()
            logits = [b + sum(w * f for w, f in zip(row, feats)) for row, b in zip(weight, bias)]
            ranked = sorted(range(len(logits)), key=lambda c: -logits[c])
            top1 += ranked[0] == sample['data_samples']
            top5 += sample['data_samples'] in ranked[:5]
    backbone.train()
    return dict(top1=100.0 * top1 / len(dataset), top5=100.0 * top5 / len(dataset))


def test_accuracy_equals_a_naive_loop_over_the_val_split():
    backbone, classifier = tiny_model()
    entry = evaluate_classifier(backbone, classifier, DIGITS, batch_size=64)
    expected = naive_accuracy(backbone, classifier, eval_split(DIGITS, 'val'))
    assert entry['settings'] == SETTINGS
    assert SETTINGS == dict(split='val', head='trained classifier', view='test')
    assert entry['metrics'] == pytest.approx(expected, abs=1e-9)
    assert 0 < entry['metrics']['top1'] < entry['metrics']['top5'] < 100
    assert backbone.training and classifier.weight.dtype == torch.float32  # both left as they were


def test_known_accuracy_and_no_top5_below_five_classes():
    """Identity head on one-hot-like features: rows 0, 1, 2 right, row 3 wrong."""
    features = torch.tensor([[2., 0, 0], [0, 2., 0], [0, 0, 2.], [2., 1, 0]])
    head = nn.Linear(3, 3)
    with torch.no_grad():
        head.weight.copy_(torch.eye(3))
        head.bias.zero_()
    assert classifier_accuracy(features, torch.tensor([0, 1, 2, 1]), head) == {'top1': 75.0}


@pytest.mark.parametrize('features, labels, message', [
    (torch.tensor([[float('nan'), 0.]]), torch.tensor([0]), 'NaN or inf'),
    (torch.zeros(2, 2), torch.tensor([0, 3]), "outside the classifier's 3 classes"),
])
def test_what_cannot_be_scored_raises(features, labels, message):
    with pytest.raises(ValueError, match=message):
        classifier_accuracy(features, labels, nn.Linear(2, 3))


def on_each_process(rank: int, world: int):
    """In the shared gloo pair (tests/methods/gloo_pair.py): what this process's call returns."""
    torch.set_num_threads(1)
    backbone, classifier = tiny_model()
    return evaluate_classifier(backbone, classifier, DIGITS, batch_size=64)


@pytest.mark.slow
def test_two_processes_give_rank_0_the_one_process_result(two_process_results):
    backbone, classifier = tiny_model()
    alone = evaluate_classifier(backbone, classifier, DIGITS, batch_size=64)
    first, second = two_process_results['tests.evaluation.test_supervised_protocol']
    assert second is None and first == alone


def fake_runner(model: nn.Module) -> SimpleNamespace:
    """What evaluate_run reads of an mmengine Runner after training."""
    loader = SimpleNamespace(dataset=SimpleNamespace(), batch_size=8)
    return SimpleNamespace(model=model, hooks=[], train_dataloader=loader, world_size=1,
                           epoch=1, visualizer=None, logger=logging.getLogger('test_supervised'))


@pytest.mark.parametrize('kind', ['Supervised', 'MoCo'])
def test_evaluate_run_records_supervised_for_supervised_models_only(kind, tmp_path,
                                                                    tiny_backbones):
    # Imported here: the two-process test's processes import this module, and need neither.
    from benchmark.evaluation.evaluate import evaluate_run
    from methods import MoCo, Supervised
    torch.manual_seed(0)
    model = (Supervised(num_classes=10, backbone=dict(depth=18)) if kind == 'Supervised'
             else MoCo(backbone=dict(depth=18), queue_size=16, feature_dim=8))
    cfg = Config(dict(model=dict(type=kind, backbone=dict(depth=18)),
                      train_dataloader=dict(batch_size=8, dataset=dict(DIGITS, split='train')),
                      train_cfg=dict(max_epochs=1), work_dir=str(tmp_path / 'work')))
    path = evaluate_run(fake_runner(model), cfg, str(tmp_path / 'results'), protocols=('knn',),
                        config_text='test')
    record = json.loads(path.read_text())
    if kind == 'MoCo':
        assert sorted(record['protocols']) == ['knn']
        return
    assert sorted(record['protocols']) == ['knn', 'supervised']
    entry = record['protocols']['supervised']
    assert entry['settings'] == SETTINGS
    expected = naive_accuracy(model.backbone, model.classifier, eval_split(DIGITS, 'val'))
    assert entry['metrics'] == pytest.approx(expected, abs=1e-9)
    assert (record['method'], record['eval_data']) == ('supervised', 'digits')
