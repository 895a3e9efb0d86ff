"""Evaluate a backbone on a dataset's train/val splits and describe the run for its record."""
import os.path as osp
import shutil
from pathlib import Path
from typing import Dict, Optional, Sequence

import torch
from mmengine.config import Config
from mmengine.dist import get_dist_info
from mmengine.registry import DATASETS
from torch import nn

from benchmark.features import extract_features
from benchmark.protocols import run_protocols
from benchmark.report import build_record, write_record

METHOD_NAMES = {'MoCo': 'mocov2', 'MixCoMoCo': 'mixco', 'SimCLR': 'simclr',
                'MixCoSimCLR': 'mixco_simclr', 'Supervised': 'supervised'}
DATA_NAMES = {'TinyImageNet': 'tiny-imagenet', 'CIFAR10': 'cifar10', 'CIFAR100': 'cifar100',
              'Digits': 'digits', 'ImageFolderDataset': 'imagefolder'}
EVAL_TYPES = {v: k for k, v in DATA_NAMES.items()}


def eval_dataset_cfg(cfg: Config, eval_data: Optional[str] = None,
                     data_root: Optional[str] = None) -> dict:
    """Dataset config for evaluation: the pretraining data, or `eval_data` (transfer)."""
    train = cfg.train_dataloader.dataset
    if eval_data is None:  # the pretraining data, with its bad_data policy if it has one
        policy = {'bad_data': train.bad_data} if 'bad_data' in train else {}
        return dict(type=train.type, data_root=data_root or train.get('data_root', ''),
                    input_size=train.get('input_size', 224), **policy)
    if eval_data not in EVAL_TYPES:
        raise ValueError(f'--eval-data {eval_data!r} unknown; choose from {sorted(EVAL_TYPES)}')
    if data_root is None and eval_data != 'digits':
        raise ValueError(f'--eval-data {eval_data} needs --data-root (the folder of its files)')
    return dict(type=EVAL_TYPES[eval_data], data_root=data_root or '',
                input_size=train.get('input_size', 224))


def evaluate_backbone(backbone: nn.Module, dataset_cfg: dict,
                      protocols: Sequence[str] = ('knn', 'linear_fast', 'cluster'),
                      batch_size: int = 256, num_workers: int = 0, seed: int = 0,
                      figure_path: Optional[str] = None,
                      title: str = '') -> Optional[Dict[str, dict]]:
    """Extract features of the train and val splits (test view) and run the protocols."""
    cls = DATASETS.get(dataset_cfg['type'])
    splits = {}
    for split in ('train', 'val'):
        cls.check_root(dataset_cfg['data_root'], split)
        policy = {'bad_data': dataset_cfg['bad_data']} if 'bad_data' in dataset_cfg else {}
        dataset = cls(data_root=dataset_cfg['data_root'], split=split,
                      input_size=dataset_cfg['input_size'], view='test', **policy)
        splits[split] = extract_features(backbone, dataset, batch_size, num_workers)
    if get_dist_info()[0] != 0:
        return None  # every process extracts its shard; rank 0 alone runs the protocols
    num_classes = len(dataset.classes)
    return run_protocols(splits['train'], splits['val'], num_classes, protocols, seed=seed,
                         figure_path=figure_path, title=title)


def describe_run(cfg: Config, checkpoint_meta: Optional[dict] = None) -> dict:
    """Method, backbone, data, epochs, seed and batch of the pretraining run behind a config."""
    meta = checkpoint_meta or {}
    model = cfg.model
    world = meta.get('world_size')
    batch = cfg.train_dataloader.batch_size
    return dict(
        method=METHOD_NAMES.get(model.type, model.type),
        backbone=f"resnet{model.get('backbone', {}).get('depth', 18)}",
        pretrain_data=DATA_NAMES.get(cfg.train_dataloader.dataset.type,
                                     cfg.train_dataloader.dataset.type),
        pretrain_epochs=int(meta.get('epoch', cfg.train_cfg.get('max_epochs', 0))),
        seed=int(cfg.get('randomness', {}).get('seed', 0) or 0),
        world_size=world,
        total_batch=batch * world if world else None,
        config=osp.basename(cfg.filename) if cfg.filename else None,
        time_s_per_epoch=meta.get('time_s_per_epoch'),
        peak_memory_gb=meta.get('peak_memory_gb'),
        # Image files the training data left out (bad_data=skip); None where unknown.
        data_skipped=meta.get('data_skipped'),
    )


def record_evaluation(protocols: Dict[str, dict], run: dict, eval_data: str,
                      results_dir: str = 'results', checkpoint: Optional[str] = None,
                      config_text: Optional[str] = None, extra: Optional[dict] = None) -> Path:
    """Write the evaluation's record; its figures move into runs/<id>/ beside it."""
    record = build_record(**run, eval_data=eval_data, protocols=protocols, checkpoint=checkpoint,
                          config_text=config_text, extra=extra)
    folder = Path(results_dir) / 'runs' / record['id']
    for entry in record['protocols'].values():
        figure = entry['settings'].get('figure')
        if figure and osp.isfile(figure):
            folder.mkdir(parents=True, exist_ok=True)
            entry['settings']['figure'] = str(Path(shutil.move(figure, folder / osp.basename(figure))))
    return write_record(record, results_dir)

