"""Online linear probe: a linear classifier on detached backbone features, trained during
pretraining (as solo-learn, lightly and stable-pretraining do), its val accuracy every epoch.

The head reads the features the method's own first backbone pass computes for the first view
(train-mode BatchNorm, as solo-learn's online classifier). Where that pass sees other images
(i-Mix feeds only mixed ones), the hook runs one extra pass over the first view, without
gradient and in eval mode, which updates no BatchNorm statistics. Which of the two applies, the
model says (`first_pass_starts_with_first_view`: False for i-Mix, True for the suite's other
methods), so a step reads nothing back from the device; the hook checks a True against the
images at logging iterations, and compares them every step for a model that says nothing. The
probe's own step (a linear layer, its SGD step) only queues device work. The features are detached,
so the encoder's gradients never change; the head starts at zero and its SGD draws nothing,
and the per-epoch validation runs between saved and restored RNG states, so the run's random
draws (views, MixCo's λ, shuffle-BN) are the same with and without the probe.
"""
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.dist import all_reduce, get_world_size
from mmengine.hooks import Hook
from mmengine.registry import DATASETS, HOOKS
from torch import Tensor, nn
from torch.nn.utils import skip_init
from torch.utils.data import Subset

from benchmark import dist
from benchmark.data.eval_input import EVAL_VIEW, eval_dataset_cfg
from benchmark.engine.deferred_log import logger_interval, reads_logs
from benchmark.engine.rng_state import capture_rng_state, restore_rng_state
from benchmark.evaluation.features import extract_features
from benchmark.evaluation.monitor import fixed_subset, log_epoch_metrics, refuse_out_of_bounds
from benchmark.evaluation.topk import topk_accuracy

PROTOCOL = 'online_linear'
CHECKPOINT_KEY = 'online_linear_probe'


def probe_step(head: nn.Linear, optimizer: torch.optim.Optimizer, features: Tensor,
               labels: Tensor) -> Tensor:
    """One SGD step of the head on detached features; gradients averaged over processes.

    Args:
        head: Linear (C, num_classes).
        optimizer: The head's own optimizer.
        features: (B, C) backbone features of this process (detached here again).
        labels: (B,) int64 class labels.

    Returns:
        The cross-entropy of this step (detached).

    The gradient of the mean cross-entropy of a linear layer is written out,
    ``(softmax(logits) - onehot) / B`` times the features, which spares autograd's graph and
    backward pass, work the host would otherwise do every step for a layer this small.
    """
    x = features.detach().to(head.weight.dtype)  # (B, C)
    with torch.no_grad():
        logits = F.linear(x, head.weight, head.bias)  # (B, num_classes)
        loss = F.cross_entropy(logits, labels)
        residual = logits.softmax(1)  # becomes d loss / d logits
        residual[torch.arange(labels.shape[0], device=labels.device), labels] -= 1
        residual /= labels.shape[0]
        head.weight.grad = residual.t() @ x  # (num_classes, C)
        head.bias.grad = residual.sum(0)
    if get_world_size() > 1:  # the heads of every process stay identical
        for param in head.parameters():
            all_reduce(param.grad, op='mean')
    optimizer.step()
    return loss.detach()


class FeatureTap:
    """Catches the backbone's output for the first view of the current training step.

    `first_pass` says what the method's first backbone pass of a step holds: True, the first
    view as its first B images (taken without looking); False, other images (the hook runs
    its own pass); None, unknown: compared with the view (`torch.equal`), which makes the host
    wait for the device. With `verify` set, a True is compared too; `mismatch` records a
    failed comparison.
    """

    def __init__(self) -> None:
        self.view: Optional[Tensor] = None  # (B, 3, H, W) first view of this step
        self.labels: Optional[Tensor] = None  # (B,)
        self.features: Optional[Tensor] = None  # (B, C), detached
        self.first_pass: Optional[bool] = None
        self.verify = False
        self.mismatch = False

    def after_preprocess(self, module: nn.Module, args: Any, output: Any) -> None:
        if not module.training or not isinstance(output, dict):
            return
        inputs, labels = output.get('inputs'), output.get('data_samples')
        view = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
        if isinstance(view, Tensor) and isinstance(labels, Tensor) and labels.ndim == 1:
            self.view, self.labels, self.features = view, labels.long(), None

    def after_backbone(self, module: nn.Module, args: Any, output: Any) -> None:
        if (self.view is None or self.features is not None or not module.training
                or self.first_pass is False):
            return
        images, b = args[0], self.view.shape[0]
        if images.shape[0] < b:
            return
        if self.first_pass is None or self.verify:
            same = images is self.view or torch.equal(images[:b], self.view)
            if not same:
                self.mismatch = self.first_pass is True
                return
        self.features = output[:b].detach()  # query view first: MoCo, MixCo, SimCLR, ...

    def clear(self) -> None:
        self.view = self.labels = self.features = None


@HOOKS.register_module()
class OnlineLinearProbeHook(Hook):
    """Train a linear head on detached backbone features during pretraining; log
    ``online_linear/top1`` (and top5) of the val split after every `interval` epochs.

    The final values go into the run's record as the protocol ``online_linear`` (labelled
    online in every table). The head and its optimizer travel in the checkpoints, so a resumed
    run continues the same head.

    Args:
        lr: SGD learning rate of the head (solo-learn's online classifier: 0.1).
        momentum: SGD momentum.
        weight_decay: SGD weight decay.
        interval: Validate after every `interval`-th epoch (and after the last one).
        num_test: Val images scored (a fixed subset drawn from `seed`); None: the whole split.
        seed: Seed of that subset's choice (not of the run).
        batch_size: Images per forward pass of the validation.
        num_workers: DataLoader workers of the validation.
    """

    priority = 'LOW'  # after the optimizer step, before the checkpoint hook saves the epoch

    def __init__(self, lr: float = 0.1, momentum: float = 0.9, weight_decay: float = 0.0,
                 interval: int = 1, num_test: Optional[int] = None, seed: int = 0,
                 batch_size: int = 256, num_workers: int = 0) -> None:
        refuse_out_of_bounds('OnlineLinearProbeHook', [
            ('lr', lr > 0, '> 0', lr), ('momentum', 0 <= momentum < 1, 'in [0, 1)', momentum),
            ('weight_decay', weight_decay >= 0, '>= 0', weight_decay),
            ('interval', interval >= 1, '>= 1', interval),
            ('num_test', num_test is None or num_test >= 1, '>= 1 or None', num_test),
            ('seed', 0 <= seed < 2 ** 32, 'in [0, 2**32)', seed),
            ('batch_size', batch_size >= 1, '>= 1', batch_size),
            ('num_workers', num_workers >= 0, '>= 0', num_workers)])
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.interval, self.num_test, self.seed = interval, num_test, seed
        self.batch_size, self.num_workers = batch_size, num_workers
        self.head: Optional[nn.Linear] = None
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.last: Optional[Dict[str, float]] = None  # metrics of the latest validation
        self._tap = FeatureTap()
        self._handles: list = []
        self._pending: Optional[dict] = None
        self._val: Optional[Subset] = None
        self._every = 1  # the logging interval, where the tap verifies the model's word

    def settings(self) -> Dict[str, Any]:
        return dict(lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay,
                    interval=self.interval, num_test=self.num_test, features='detached, '
                    'first view of the training pass', when='during pretraining')

    def online_protocol(self) -> Optional[Tuple[str, dict]]:
        """('online_linear', {'settings', 'metrics'}) of the last validation, or None."""
        if self.last is None:
            return None
        metrics = {k: v for k, v in self.last.items() if k != 'epoch'}
        return PROTOCOL, dict(settings=dict(self.settings(), epoch=self.last['epoch']),
                              metrics=metrics)

    def val_subset(self, cfg) -> Subset:
        """The val split (test view) of the pretraining data, or its fixed subset."""
        if self._val is None:
            data = eval_dataset_cfg(cfg)
            policy = {'bad_data': data['bad_data']} if 'bad_data' in data else {}
            dataset = DATASETS.get(data['type'])(data_root=data['data_root'], split='val',
                                                 input_size=data['input_size'], view=EVAL_VIEW,
                                                 **policy)
            size = len(dataset) if self.num_test is None else self.num_test
            indices = fixed_subset(np.random.default_rng(self.seed), len(dataset), size)
            self._val = Subset(dataset, indices.tolist())
        return self._val

    # -- set-up and checkpoints --------------------------------------------------------------
    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        self._pending = checkpoint.get(CHECKPOINT_KEY)
        if self.head is not None and self._pending is not None:
            self._load(self._pending)

    def _build(self, dim: int, device: torch.device) -> None:
        """The zero head and its optimizer (+ the state a resumed checkpoint brought)."""
        num_classes = len(self._val.dataset.classes)
        # Zeros, built without nn.Linear's own init, which would draw from the global generator.
        self.head = skip_init(nn.Linear, dim, num_classes, device=device)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.optimizer = torch.optim.SGD(self.head.parameters(), lr=self.lr,
                                         momentum=self.momentum, weight_decay=self.weight_decay)
        if self._pending is not None:
            self._load(self._pending)

    def before_train(self, runner) -> None:
        model = dist.unwrap(runner.model)
        self.val_subset(runner.cfg)  # a broken val split fails now
        self._tap.first_pass = getattr(model, 'first_pass_starts_with_first_view', None)
        self._every = logger_interval(runner) or 1
        dim = getattr(model.backbone, 'feature_dim', None)  # else: from the first features
        if dim is not None and self.head is None:
            self._build(dim, next(model.backbone.parameters()).device)
        self._handles = [
            model.data_preprocessor.register_forward_hook(self._tap.after_preprocess),
            model.backbone.register_forward_hook(self._tap.after_backbone)]

    def _load(self, state: dict) -> None:
        self.head.load_state_dict(state['head'])
        self.optimizer.load_state_dict(state['optimizer'])
        self.last = dict(state['last']) if state.get('last') else None
        self._pending = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self.head is not None:
            checkpoint[CHECKPOINT_KEY] = dict(head=self.head.state_dict(),
                                              optimizer=self.optimizer.state_dict(),
                                              last=self.last)

    def after_train(self, runner) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    # -- training ----------------------------------------------------------------------------
    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        self._tap.clear()
        # The model's word on its first pass is checked where the host reads anyway.
        self._tap.verify = self._tap.first_pass is True and reads_logs(runner, batch_idx,
                                                                       self._every)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        tap = self._tap
        if tap.view is None:
            return  # no labelled first view seen in this step
        if tap.mismatch:
            tap.first_pass, tap.mismatch = None, False  # compare every step from now on
            runner.logger.warning(
                f'{type(dist.unwrap(runner.model)).__name__}.first_pass_starts_with_first_view '
                f'is True, but the first backbone pass of iteration {runner.iter + 1} saw '
                'other images; the online probe now compares them every step')
        features = tap.features
        if features is None:  # the method's first pass saw other images (i-Mix)
            backbone = dist.unwrap(runner.model).backbone
            was_training = backbone.training
            backbone.eval()  # running statistics are read, not updated
            with torch.no_grad():
                features = backbone(tap.view)
            backbone.train(was_training)
        if self.head is None:
            self._build(features.shape[1], features.device)
        probe_step(self.head, self.optimizer, features, tap.labels)
        tap.clear()

    def after_train_epoch(self, runner) -> None:
        if self.every_n_epochs(runner, self.interval) or self.is_last_train_epoch(runner):
            self.evaluate(runner)

    def evaluate(self, runner) -> Optional[Dict[str, float]]:
        """Top-1/top-5 of the head on the val features (every process extracts, rank 0 logs);
        the global RNG states are restored afterwards (the loader draws a base seed)."""
        if self.head is None:
            return None  # no step has trained it yet
        backbone = dist.unwrap(runner.model).backbone
        state = capture_rng_state()
        try:
            feats, labels = extract_features(backbone, self.val_subset(runner.cfg),
                                             self.batch_size, self.num_workers, progress=False)
        finally:
            restore_rng_state(state)
        with torch.no_grad():
            scores = self.head(feats.to(self.head.weight.device)).float().cpu()  # (N, classes)
        epoch = runner.epoch + 1  # after_train_epoch runs before the loop counts the epoch
        accuracy = topk_accuracy(scores, labels)
        self.last = dict(accuracy, epoch=epoch)
        if not dist.is_main():
            return None
        return log_epoch_metrics(runner, PROTOCOL, accuracy, epoch, f'val images {len(labels)}')
