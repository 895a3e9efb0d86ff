"""kNN accuracy of the backbone on a fixed subset of the pretraining data, logged during training.

A cheap progress signal between the end-of-training evaluations: the same weighted kNN as the
``knn`` protocol (InstDisc), but on a small bank and query set so it can run every few epochs.
The numbers are not comparable with the full protocol's (smaller bank, fewer queries).
"""
from typing import Dict, Optional

import numpy as np
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.registry import DATASETS, HOOKS
from torch.utils.data import Subset

from benchmark import dist
from benchmark.data.eval_input import EVAL_VIEW, eval_dataset_cfg
from benchmark.evaluation.features import extract_features
from benchmark.evaluation.knn import knn_k_for, knn_predict
from benchmark.evaluation.monitor import fixed_subset, log_epoch_metrics, refuse_out_of_bounds
from benchmark.evaluation.topk import topk_accuracy


@HOOKS.register_module()
class KNNMonitorHook(Hook):
    """Log the kNN top-1/top-5 of a fixed train/val subset every `interval` epochs and at the end.

    The bank is `num_train` images of the train split, the queries `num_test` images of the val
    split, both in the test view (resize + center crop) and drawn once from `seed`, so every
    evaluation of a run (and of its resumed part) scores the same images. Scalars
    ``knn_monitor/top1`` and ``knn_monitor/top5`` go to the message hub and to every visualizer
    backend (``vis_data/scalars.json``, wandb) with ``step`` = completed epochs.

    Args:
        interval: Evaluate after every `interval`-th epoch (and after the last one).
        num_train: Images of the kNN bank (train split).
        num_test: Query images (val split).
        k: Neighbours that vote; None: the kNN protocol's rule (`knn_k_for`) on the bank.
        temperature: Vote weight is exp(cosine similarity / temperature).
        seed: Seed of the subset choice (not of the run).
        batch_size: Images per forward pass of the extraction.
        num_workers: DataLoader workers of the extraction.
    """

    def __init__(self, interval: int = 1, num_train: int = 1000, num_test: int = 500,
                 k: Optional[int] = None, temperature: float = 0.1, seed: int = 0,
                 batch_size: int = 128, num_workers: int = 0) -> None:
        refuse_out_of_bounds('KNNMonitorHook', [
            ('interval', interval >= 1, '>= 1', interval),
            ('num_train', num_train >= 1, '>= 1', num_train),
            ('num_test', num_test >= 1, '>= 1', num_test),
            ('k', k is None or k >= 1, 'None or >= 1', k),
            ('temperature', temperature > 0, '> 0', temperature),
            ('seed', 0 <= seed < 2 ** 32, 'in [0, 2**32)', seed),
            ('batch_size', batch_size >= 1, '>= 1', batch_size),
            ('num_workers', num_workers >= 0, '>= 0', num_workers)])
        self.interval, self.num_train, self.num_test = interval, num_train, num_test
        self.k, self.temperature, self.seed = k, temperature, seed
        self.batch_size, self.num_workers = batch_size, num_workers
        self.num_classes = 0
        self._subsets: Optional[Dict[str, Subset]] = None

    def subsets(self, cfg: Config) -> Dict[str, Subset]:
        """{'train': bank subset, 'val': query subset} of the pretraining data, built once."""
        if self._subsets is None:
            data = eval_dataset_cfg(cfg)  # type, data_root, input_size of train_dataloader
            cls = DATASETS.get(data['type'])
            rng = np.random.default_rng(self.seed)
            subsets = {}
            for split, size in (('train', self.num_train), ('val', self.num_test)):
                policy = {'bad_data': data['bad_data']} if 'bad_data' in data else {}
                dataset = cls(data_root=data['data_root'], split=split,
                              input_size=data['input_size'], view=EVAL_VIEW, **policy)
                subsets[split] = Subset(dataset, fixed_subset(rng, len(dataset), size).tolist())
            self.num_classes = len(dataset.classes)
            self._subsets = subsets
        return self._subsets

    def before_train(self, runner) -> None:
        self.subsets(runner.cfg)  # a broken val split fails now, not after the first epoch

    def after_train_epoch(self, runner) -> None:
        if self.every_n_epochs(runner, self.interval) or self.is_last_train_epoch(runner):
            self.evaluate(runner)

    def evaluate(self, runner) -> Optional[Dict[str, float]]:
        """Extract (every process), score and log (rank 0); the scalars logged, else None."""
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        subsets = self.subsets(runner.cfg)
        # extract_features puts the backbone in eval mode and back into its previous mode.
        bank, bank_labels = extract_features(model.backbone, subsets['train'], self.batch_size,
                                             self.num_workers, progress=False)
        queries, labels = extract_features(model.backbone, subsets['val'], self.batch_size,
                                           self.num_workers, progress=False)
        if not dist.is_main():
            return None
        epoch = runner.epoch + 1  # after_train_epoch runs before the loop counts the epoch
        k = self.k if self.k is not None else knn_k_for(bank_labels)
        try:
            scores = knn_predict(bank, bank_labels, queries, self.num_classes, k,
                                 self.temperature)
            accuracy = topk_accuracy(scores, labels)
        except ValueError as err:  # e.g. NaN features of a diverged run: log, keep training
            runner.logger.warning(f'knn_monitor: epoch {epoch} skipped: {err}')
            return None
        return log_epoch_metrics(runner, 'knn_monitor', accuracy, epoch,
                                 f'bank {len(bank)}, queries {len(queries)}, k={k}')
