"""Describe a run, evaluate its backbone, write its record and report: the one step that
`tools/train.py` (after pretraining) and `tools/eval.py` (any checkpoint) share."""
import json
import os.path as osp
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence, Union

import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import DATASETS
from torch import nn

from benchmark import dist, layout
from benchmark.data.eval_input import EVAL_VIEW, eval_dataset_cfg
from benchmark.engine.checkpoints import checkpoint_meta, load_backbone
from benchmark.engine.config_text import pretty_text
from benchmark.engine.run_info import RunInfoHook
from benchmark.engine.tracking import log_record
from benchmark.evaluation.device import eval_device
from benchmark.evaluation.features import extract_features
from benchmark.evaluation.linear_paper import (
    default_linear_config,
    linear_work_dir,
    run_linear_paper,
)
from benchmark.evaluation.protocols import run_protocols
from benchmark.evaluation.step_cost import kept_rng, run_compute, training_step_cost
from benchmark.evaluation.supervised import evaluate_classifier
from benchmark.names import (
    DATA_NAMES,
    DEFAULT_PROTOCOLS,
    FEATURE_PROTOCOLS,
    METHOD_NAMES,
    RANDOM_INIT,
    protocol_name,
)
from benchmark.reports.records import build_record, write_record
from methods.backbones import backbone_name, build_resnet

def evaluate_backbone(backbone: nn.Module, dataset_cfg: dict,
                      protocols: Sequence[str] = ('knn', 'linear_fast', 'cluster'),
                      batch_size: int = 256, num_workers: int = 0, seed: int = 0,
                      figure_path: Optional[str] = None,
                      title: str = '',
                      device: Optional[Union[str, torch.device]] = None
                      ) -> Optional[Dict[str, dict]]:
    """Extract features of the train and val splits (test view) and run the protocols.

    `device`: where the features are extracted (the backbone must be there already), kNN
    searches and the fast linear probe trains; None: the backbone's device.
    """
    device = torch.device(device) if device is not None else next(backbone.parameters()).device
    cls = DATASETS.get(dataset_cfg['type'])
    splits = {}
    for split in ('train', 'val'):
        cls.check_root(dataset_cfg['data_root'], split)
        policy = {'bad_data': dataset_cfg['bad_data']} if 'bad_data' in dataset_cfg else {}
        dataset = cls(data_root=dataset_cfg['data_root'], split=split,
                      input_size=dataset_cfg['input_size'], view=EVAL_VIEW, **policy)
        splits[split] = extract_features(backbone, dataset, batch_size, num_workers,
                                         device=device)
    if not dist.is_main():
        return None  # every process extracts its shard; rank 0 alone runs the protocols
    num_classes = len(dataset.classes)
    return run_protocols(splits['train'], splits['val'], num_classes, protocols, seed=seed,
                         figure_path=figure_path, title=title, device=device)


def describe_run(cfg: Config, meta: Optional[dict] = None) -> dict:
    """Method, backbone, data, epochs, seed and batch of the pretraining run behind a config."""
    meta = meta or {}
    model = cfg.model
    world = meta.get('world_size')
    batch = cfg.train_dataloader.batch_size
    return dict(
        method=METHOD_NAMES.get(model.type, model.type),
        backbone=backbone_name(**model.get('backbone', {})),
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
        views=meta.get('views'),  # 'device' or 'loader'; None where unknown
    )


def setting_fields(setting: Optional[dict]) -> dict:
    """build_record's setting_text and overrides from `config_text.config_setting` (or None)."""
    if not setting:
        return {}
    return dict(setting_text=setting['text'], overrides=setting['overrides'])


def record_evaluation(protocols: Dict[str, dict], run: dict, eval_data: str,
                      results_dir: str = layout.RESULTS_DIR, checkpoint: Optional[str] = None,
                      config_text: Optional[str] = None, extra: Optional[dict] = None,
                      setting: Optional[dict] = None) -> Path:
    """Write the evaluation's record; its figures move into runs/<id>/ beside it.
    `setting`: `config_text.config_setting` of the config (the record's setting and overrides)."""
    record = build_record(**run, eval_data=eval_data, protocols=protocols, checkpoint=checkpoint,
                          config_text=config_text, extra=extra, **setting_fields(setting))
    folder = layout.run_folder(results_dir, record['id'])
    for entry in record['protocols'].values():
        figure = entry['settings'].get('figure')
        if figure and osp.isfile(figure):
            folder.mkdir(parents=True, exist_ok=True)
            entry['settings']['figure'] = str(Path(shutil.move(figure, folder / osp.basename(figure))))
    return write_record(record, results_dir)


# -- after pretraining (tools/train.py) ----------------------------------------------------------

def _run_info(runner) -> RunInfoHook:
    """The run's RunInfoHook; a config without one (custom_hooks=[]) still gets its world size,
    batch and memory recorded, without time per epoch or images trained on."""
    found = next((h for h in runner.hooks if isinstance(h, RunInfoHook)), None)
    if found is None:
        found = RunInfoHook()
        found.images_trained = None  # nothing counted them
    return found


def count_training_step(runner, model: nn.Module) -> Optional[dict]:
    """The record's ``extra.compute``: one training step of the run, counted once after
    training on a copy of its model and a batch of its training loader, its loss in the
    optimizer wrapper's context (autocast) as in training (`training_step_cost`; the random
    generators are left as they were); None, with a warning, where it cannot be counted."""
    wrapper = getattr(runner, 'optim_wrapper', None)
    try:
        with kept_rng(next(model.parameters()).device):
            batch = next(iter(runner.train_dataloader))
        return training_step_cost(model, batch, getattr(wrapper, 'optim_context', None))
    except Exception as err:  # noqa: BLE001 - a count never costs a run its record
        runner.logger.warning(f'the training step was not counted for the record '
                              f'({type(err).__name__}: {err})')
        return None


def online_results(runner) -> Dict[str, dict]:
    """Protocols measured during pretraining by hooks with ``online_protocol()`` (e.g.
    ``OnlineLinearProbeHook``): {name: {'settings': ..., 'metrics': ...}} of those that ran."""
    found = {}
    for hook in runner.hooks:
        report = getattr(hook, 'online_protocol', None)
        entry = report() if callable(report) else None
        if entry is not None:
            found[entry[0]] = entry[1]
    return found


def evaluate_run(runner, cfg: Config, results_dir: str,
                 protocols: Sequence[str] = DEFAULT_PROTOCOLS,
                 config_text: Optional[str] = None,
                 setting: Optional[dict] = None, trained: bool = True) -> Optional[Path]:
    """The default protocols on the pretraining data's splits (and, for a supervised model,
    the `supervised` protocol: its own classifier on the val split); rank 0 writes the record
    (with the online protocols' final values), the run report, and logs the metrics to the
    run's wandb run (if any). Everything runs on the training device (the backbone's).
    `config_text`: what config_sha256 hashes (default: the whole config). A resume that
    ``trained`` nothing (the run had ended) and whose final checkpoint has a record in
    ``results_dir`` already writes no second one: that record's path."""
    last = layout.epoch_checkpoint(cfg.work_dir, runner.epoch)
    before = None if trained else recorded_before(results_dir, last)
    if not dist.any_process(before is None):
        runner.logger.info(f'nothing left to train; {last} was evaluated before: {before}')
        return before
    model = dist.unwrap(runner.model)
    info = _run_info(runner).info(runner)
    skipped = getattr(runner.train_dataloader.dataset, 'skipped_files', 0)  # bad_data=skip
    run = describe_run(cfg, dict(info, epoch=runner.epoch, data_skipped=skipped))
    figure = osp.join(cfg.work_dir, layout.TSNE_FIGURE)
    data = eval_dataset_cfg(cfg)
    results = evaluate_backbone(model.backbone, data, protocols,
                                seed=run['seed'], figure_path=figure,
                                title=f"{run['method']} {run['backbone']}",
                                device=next(model.backbone.parameters()).device)
    # A supervised model is also scored by its own trained classifier (the paper's
    # supervised rows); every process takes part, as in the feature extraction above.
    own_head = None
    if run['method'] == 'supervised' and isinstance(getattr(model, 'classifier', None), nn.Module):
        own_head = evaluate_classifier(model.backbone, model.classifier, data)
    compute = count_training_step(runner, model)  # every process: a step's collectives
    if compute:
        compute.update(run_compute(compute, info))
    if results is None:
        return None
    if own_head is not None:
        results['supervised'] = own_head
    results.update(online_results(runner))
    path = record_evaluation(results, run, run['pretrain_data'], results_dir,
                             last if osp.isfile(last) else None,
                             pretty_text(cfg) if config_text is None else config_text,
                             extra=dict(memory_kind=info['memory_kind'],
                                        **{k: info[k] for k in ('key_bn',) if k in info},
                                        **({'compute': compute} if compute else {})),
                             setting=setting)
    runner.logger.info(f'evaluation record: {path}')
    # Imported here: the report's statistics and plots add about 0.8 s to a training process's start.
    from benchmark.reports.run_report import write_run_report
    runner.logger.info(f'run report: {write_run_report(str(path), cfg.work_dir)}')
    log_record(runner.visualizer, json.loads(Path(path).read_text()))
    return path


def record_divergence(runner, cfg: Config, results_dir: str, message: str,
                      config_text: Optional[str] = None,
                      setting: Optional[dict] = None) -> Path:
    """A record with status 'diverged' (NA metrics), so the run shows instead of vanishing."""
    run = describe_run(cfg, dict(_run_info(runner).info(runner), epoch=runner.epoch))
    reason = f'NA(diverged at iteration {runner.iter + 1})'
    protocols = {name: dict(settings={}, metrics=dict(top1=reason)) for name in ('knn', 'linear_fast')}
    record = build_record(**run, eval_data=run['pretrain_data'], protocols=protocols,
                          config_text=pretty_text(cfg) if config_text is None else config_text,
                          status='diverged',
                          extra=dict(error=message), **setting_fields(setting))
    return write_record(record, results_dir)


def recorded_before(results_dir: str, checkpoint: str) -> Optional[Path]:
    """The record in ``results_dir`` of an evaluation of ``checkpoint`` (the same file), if any."""
    target = osp.realpath(checkpoint)
    for path in sorted(layout.records_dir(results_dir).glob('*.json')):
        try:
            named = json.loads(path.read_text(encoding='utf-8')).get('checkpoint')
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        if isinstance(named, str) and osp.realpath(named) == target:
            return path
    return None


class AfterTrain(Hook):
    """Call ``fn(runner, trained)`` once training has ended, before the loggers close (so the
    metrics reach the run's still-open wandb run); ``trained``: whether this process trained
    any iteration (a resume of a run that had ended trains none)."""

    priority = 'LOWEST'

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.started_at: Optional[int] = None

    def before_train(self, runner) -> None:
        self.started_at = runner.iter  # after a resume: the checkpoint's iteration

    def after_train(self, runner) -> None:
        self.fn(runner, self.started_at is None or runner.iter > self.started_at)


# -- any checkpoint (tools/eval.py) --------------------------------------------------------------

def evaluate_checkpoint(cfg: Config, checkpoint: str, protocols: Sequence[str],
                        eval_data: Optional[str] = None, data_root: Optional[str] = None,
                        linear_config: Optional[str] = None, batch_size: int = 256,
                        num_workers: int = 2, work_dir_of: Optional[str] = None,
                        work_dir: Optional[str] = None,
                        device: Optional[Union[str, torch.device]] = None) -> dict:
    """Evaluate one checkpoint (ours, the authors', torchvision's) or 'random' on a dataset.

    Everything that can fail on bad input (data root, checkpoint file, layout, protocol name)
    fails before any feature is extracted.

    Args:
        cfg: The pretraining config of the checkpoint (backbone, data, seed).
        checkpoint: A checkpoint file, or 'random' for the seeded random-init encoder.
        protocols: Protocol names (FEATURE_PROTOCOLS, 'linear_paper'; 'tsne' is an alias).
        eval_data: Another dataset (transfer); None: the pretraining data.
        data_root: Root of the evaluation data.
        linear_config: configs/eval file of 'linear_paper' (default: by eval data).
        work_dir_of: The config path the linear probe's work dir is named after.
        work_dir: Put the linear probe's work dir inside this folder instead (a suite's run).
        device: Where features are extracted, kNN searches and the fast linear probe trains
            ('cpu', 'cuda', 'cuda:N'); None: 'cuda' when torch sees a GPU, else 'cpu'. The
            cluster indices run on the CPU; 'linear_paper' is an mmengine run on its own
            (the GPU when torch sees one).

    Returns:
        dict(protocols=..., run=..., eval_data=..., layout=..., meta=...).
    """
    requested = [protocol_name(p) for p in protocols]  # 'tsne' -> 'cluster_tsne'
    device = eval_device(device)
    dataset_cfg = eval_dataset_cfg(cfg, eval_data, data_root)
    run, meta, layout_name = describe_run(cfg), {}, 'random-init'
    torch.manual_seed(run['seed'])  # the same random encoder every time for 'random'
    backbone = build_resnet(**cfg.model.get('backbone', {}))
    if checkpoint != 'random':
        if not osp.isfile(checkpoint):
            raise FileNotFoundError(f'checkpoint {checkpoint} not found')
        layout_name = load_backbone(backbone, checkpoint)
        meta = checkpoint_meta(checkpoint)
        run = describe_run(cfg, meta)
        if layout_name != 'mixco-bench':
            run['method'] = f"{run['method']} ({layout_name})"
    else:
        run.update(method=RANDOM_INIT, pretrain_epochs=0)
    eval_data = eval_data or run['pretrain_data']
    figure = osp.join(tempfile.mkdtemp(), layout.TSNE_FIGURE)
    feature_protocols = [p for p in requested if p in FEATURE_PROTOCOLS]
    results = evaluate_backbone(backbone.to(device), dataset_cfg, feature_protocols,
                                batch_size, num_workers, run['seed'], figure,
                                f"{run['method']} {run['backbone']} on {eval_data}", device
                                ) if feature_protocols else {}
    if 'linear_paper' in requested:
        linear_cfg = linear_config or default_linear_config(eval_data)
        linear_dir = linear_work_dir(work_dir_of or cfg.filename or 'config', checkpoint, linear_cfg)
        if work_dir:
            linear_dir = osp.join(work_dir, osp.basename(linear_dir))
        results['linear_paper'] = run_linear_paper(
            linear_cfg, None if checkpoint == 'random' else checkpoint,
            dict(cfg.model.get('backbone', {})), dataset_cfg['data_root'], linear_dir)
    return dict(protocols=results, run=run, eval_data=eval_data, layout=layout_name, meta=meta)
