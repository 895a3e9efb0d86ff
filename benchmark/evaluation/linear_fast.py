"""The `fast` linear probe: a linear classifier trained on cached frozen features.

No augmentation and no encoder forward passes, so it runs in seconds on a CPU (or on the
device `train_linear_probe` is given: tools/eval.py's --device); the paper's
protocol (augmented images through the frozen encoder, lr 3.0 with steps at 60 and 80) lives
elsewhere. Numbers from the two protocols are not interchangeable and records name the protocol.

Choices, and why:
- Features are standardised (per-dimension mean and std of the training set, applied to both
  splits), i.e. a BatchNorm without affine in front of the classifier, as in MAE's linear probe.
  This makes one learning rate work for any backbone's feature scale; L2 normalisation instead
  would shrink the logits to |w| and need a backbone-dependent lr (the paper's lr 3.0 / MoCo's 30).
- SGD, momentum 0.9, cosine decay to 0, zero initial weights: the problem is convex, so this
  converges reliably, and zero init leaves the shuffling order as the only randomness.
"""
import math
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.evaluation.topk import topk_accuracy

ArrayLike = Union[np.ndarray, Tensor]


def _as_tensors(features: ArrayLike, labels: ArrayLike, name: str) -> Tuple[Tensor, Tensor]:
    """float32 features (N, D) and int64 labels (N,) on CPU, validated."""
    x = torch.as_tensor(features.detach().cpu() if isinstance(features, Tensor)
                        else np.asarray(features)).float()
    y = torch.as_tensor(labels.detach().cpu() if isinstance(labels, Tensor)
                        else np.asarray(labels)).long()
    if x.ndim != 2 or y.shape != (x.shape[0],) or x.shape[0] == 0:
        raise ValueError(f'linear probe: {name} features must be (N, D) and labels (N,) with '
                         f'N > 0, got {tuple(x.shape)} and {tuple(y.shape)}')
    if not torch.isfinite(x).all():
        raise ValueError(f'linear probe: {name} features contain NaN or inf; the encoder '
                         'diverged or the features are corrupt')
    return x, y


def standardize(train: Tensor, test: Tensor, eps: float = 1e-6) -> Tuple[Tensor, Tensor]:
    """Standardise both splits with the training set's per-dimension statistics.

    Args:
        train: Shape (N_train, D).
        test: Shape (N_test, D).
        eps: Added to the std so that constant dimensions map to 0 instead of NaN.

    Returns:
        (train - mean) / (std + eps) and (test - mean) / (std + eps), same shapes.
    """
    mean, std = train.mean(dim=0), train.std(dim=0, unbiased=False)  # D, D
    return (train - mean) / (std + eps), (test - mean) / (std + eps)


def _train(classifier: nn.Linear, x: Tensor, y: Tensor, epochs: int, lr: float,
           batch_size: int, weight_decay: float, generator: torch.Generator) -> float:
    """SGD with momentum 0.9 and a per-step cosine schedule; returns the last epoch's mean loss."""
    optimizer = torch.optim.SGD(classifier.parameters(), lr=lr, momentum=0.9,
                                weight_decay=weight_decay)
    steps_per_epoch = math.ceil(x.shape[0] / batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs * steps_per_epoch)
    for _ in range(epochs):
        # Drawn on the CPU on every device: the same seed gives the same order everywhere.
        order = torch.randperm(x.shape[0], generator=generator).to(x.device)
        total = 0.0
        for start in range(0, x.shape[0], batch_size):
            batch = order[start:start + batch_size]
            loss = F.cross_entropy(classifier(x[batch]), y[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            total += loss.item() * batch.numel()
    return total / x.shape[0]


def train_linear_probe(train_features: ArrayLike, train_labels: ArrayLike,
                       test_features: ArrayLike, test_labels: ArrayLike, num_classes: int,
                       epochs: int = 100, lr: float = 0.1, batch_size: int = 256,
                       weight_decay: float = 0.0, seed: int = 0,
                       device: Optional[Union[str, torch.device]] = None) -> Dict[str, Any]:
    """Train a linear classifier on cached features and report its final-epoch test accuracy.

    Args:
        train_features: Shape (N_train, D), numpy or torch on any device.
        train_labels: Shape (N_train,), integers in [0, num_classes).
        test_features: Shape (N_test, D).
        test_labels: Shape (N_test,).
        num_classes: Number of classes C.
        epochs: Passes over the training features.
        lr: Peak SGD learning rate (for standardised features), decayed by cosine to 0.
        batch_size: Samples per step.
        weight_decay: L2 penalty (the paper uses 0).
        seed: Seeds the shuffling; the same inputs and seed give the same result.
        device: Where the features, the classifier and its training go (default: the CPU).

    Returns:
        top1 (and top5 when C >= 5) test accuracy in percent after the LAST epoch (not the
        best over epochs, which would select on the test set), the final training loss and the
        settings used.
    """
    x_train, y_train = _as_tensors(train_features, train_labels, 'train')
    x_test, y_test = _as_tensors(test_features, test_labels, 'test')
    if x_train.shape[1] != x_test.shape[1]:
        raise ValueError(f'linear probe: train features have dimension {x_train.shape[1]}, '
                         f'test features {x_test.shape[1]}')
    if y_train.min() < 0 or y_train.max() >= num_classes:
        raise ValueError(f'linear probe: train labels must lie in [0, {num_classes})')
    device = torch.device('cpu' if device is None else device)
    x_train, x_test = standardize(x_train.to(device), x_test.to(device))
    y_train, y_test = y_train.to(device), y_test.to(device)
    classifier = nn.Linear(x_train.shape[1], num_classes, device=device)
    nn.init.zeros_(classifier.weight)
    nn.init.zeros_(classifier.bias)
    generator = torch.Generator().manual_seed(seed)
    train_loss = _train(classifier, x_train, y_train, epochs, lr, batch_size, weight_decay,
                        generator)
    with torch.no_grad():
        accuracy = topk_accuracy(classifier(x_test), y_test, topk=(1, 5))
    return {**accuracy, 'train_loss': train_loss, 'epochs': epochs, 'lr': lr,
            'batch_size': batch_size, 'weight_decay': weight_decay, 'seed': seed,
            'normalization': 'standardize', 'optimizer': 'sgd_momentum_cosine'}
