"""Supervised baseline: cross-entropy and top-1 of backbone + linear classifier."""
import math

import pytest
import torch
from mmengine.registry import MODELS

from methods.supervised import Supervised


def _naive_ce(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean over rows of -log softmax(logits)[label], a float64 loop."""
    total = 0.0
    for row, label in zip(logits.double().tolist(), labels.tolist()):
        top = max(row)
        log_norm = top + math.log(sum(math.exp(v - top) for v in row))
        total += log_norm - row[label]
    return total / len(labels)


def test_registered_under_its_name():
    assert MODELS.get('Supervised') is Supervised
    model = MODELS.build(dict(type='Supervised', num_classes=7, backbone=dict(depth=18)))
    assert (model.classifier.in_features, model.classifier.out_features) == (512, 7)


def test_loss_is_cross_entropy_and_accuracy_of_the_classifier():
    torch.manual_seed(0)
    model = Supervised(num_classes=5, backbone=dict(depth=18, small_stem=True)).eval()
    x = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model.classifier(model.backbone(x))  # 4 x 5
        predicted = logits.argmax(1)
        # rows 0 and 2 labelled with their prediction, rows 1 and 3 with another class
        labels = torch.stack([predicted[0], (predicted[1] + 1) % 5,
                              predicted[2], (predicted[3] + 2) % 5])
        out = model(x, labels, mode='loss')
    assert set(out) == {'loss_ce', 'acc_top1'}
    assert out['loss_ce'].item() == pytest.approx(_naive_ce(logits, labels), rel=1e-6)
    assert out['acc_top1'].item() == 0.5


def test_loss_has_gradient_for_backbone_and_classifier():
    torch.manual_seed(0)
    model = Supervised(num_classes=3, backbone=dict(depth=18, small_stem=True))
    x = torch.randn(4, 3, 8, 8)
    model(x, torch.tensor([0, 1, 2, 0]), mode='loss')['loss_ce'].backward()
    assert model.classifier.weight.grad.abs().sum() > 0
    assert model.backbone.conv1.weight.grad.abs().sum() > 0


def test_fewer_than_two_classes_is_one_line_error():
    with pytest.raises(ValueError, match=r'^model.num_classes must be >= 2, got 1$'):
        Supervised(num_classes=1)
