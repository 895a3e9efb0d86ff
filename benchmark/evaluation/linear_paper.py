"""The paper's linear protocol as an mmengine run: augmented images through the frozen encoder.

Unlike `benchmark/evaluation/linear_fast.py` (the fast probe on cached features), every epoch feeds freshly
augmented images (RandomResizedCrop + flip) through the frozen encoder in eval mode, with the
authors' schedule (configs/eval/linear_*.py). The reported accuracy is the FINAL epoch's on the
evaluation split; the best epoch's is reported only as `best_top1_selected_on_test`, because
picking it looks at the test labels.
"""
import os
import os.path as osp
import sys
from typing import Dict, List, Optional, Tuple

from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import DATASETS
from mmengine.runner import Runner

from benchmark import dist
from benchmark.engine.compat import (allow_mmengine_checkpoints, forget_run_instances,
                                     setup_cpu_distributed)
from benchmark.engine.config_file import read_config
from benchmark.engine.tracking import configure_wandb
from benchmark.layout import EVAL_CONFIG_DIR as CONFIG_DIR
from benchmark.layout import WORK_DIRS, config_stem
from benchmark.names import LINEAR_CONFIG_SUFFIX

CONFIG_SUFFIX = LINEAR_CONFIG_SUFFIX  # evaluation data name -> suffix of its linear config


def default_linear_config(eval_data: str) -> str:
    """configs/eval/linear_r18_<data>.py for an evaluation data name ('tiny-imagenet' -> tiny).

    The backbone's depth comes from the pretraining config, so the r18 file serves every depth.
    """
    if eval_data not in CONFIG_SUFFIX:
        raise ValueError(f'no linear config for eval data {eval_data!r} (have '
                         f'{sorted(CONFIG_SUFFIX)}); pass --linear-config')
    return str(CONFIG_DIR / f'linear_r18_{CONFIG_SUFFIX[eval_data]}.py')


def linear_work_dir(pretrain_config: str, checkpoint: str, eval_config: str) -> str:
    """work_dirs/<pretraining config>/<linear config>_<checkpoint file>, e.g.
    work_dirs/mixco_r18_tiny/linear_r18_tiny_epoch_100 ('random' for a random init)."""
    return osp.join(WORK_DIRS, config_stem(pretrain_config),
                    f'{config_stem(eval_config)}_{config_stem(checkpoint)}')


class ValHistory(Hook):
    """Keep (epoch, metrics) of every validation of the run."""

    priority = 'LOW'

    def __init__(self) -> None:
        self.history: List[Tuple[int, Dict[str, float]]] = []

    def after_val_epoch(self, runner, metrics: Optional[Dict[str, float]] = None) -> None:
        # Strip the metric's prefix: 'linear/top1' -> 'top1'.
        self.history.append((runner.epoch, {k.split('/')[-1]: float(v)
                                            for k, v in (metrics or {}).items()}))


def load_linear_config(eval_config: str, checkpoint: Optional[str], backbone: dict,
                       data_root: Optional[str], work_dir: str,
                       cfg_options: Optional[dict] = None) -> Config:
    """The eval config with encoder, data root, work dir and overrides applied, data checked.

    The val split always takes the train split's data root (both live in one folder for every
    dataset) and input size, so overriding `train_dataloader.dataset.*` is enough.
    """
    if not osp.isfile(eval_config):
        raise FileNotFoundError(f'linear config {eval_config} not found; see configs/eval/')
    if checkpoint is not None and not osp.isfile(checkpoint):
        raise FileNotFoundError(f'checkpoint {checkpoint} not found')
    cfg = read_config(eval_config)
    cfg.model.checkpoint = checkpoint
    cfg.model.backbone = dict(backbone)
    if data_root is not None:
        cfg.train_dataloader.dataset.data_root = data_root
    cfg.merge_from_dict(cfg_options or {})
    for key in ('data_root', 'input_size'):
        cfg.val_dataloader.dataset[key] = cfg.train_dataloader.dataset[key]
    cfg.work_dir = work_dir
    for loader in (cfg.train_dataloader, cfg.val_dataloader):
        DATASETS.get(loader.dataset.type).check_root(loader.dataset.data_root,
                                                     loader.dataset.split)
    return cfg


def run_linear_paper(eval_config: str, checkpoint: Optional[str], backbone: dict,
                     data_root: Optional[str], work_dir: str,
                     cfg_options: Optional[dict] = None) -> dict:
    """Train the paper's linear probe on a frozen encoder and evaluate it.

    Args:
        eval_config: A configs/eval/linear_*.py file.
        checkpoint: Pretrained encoder (any layout `load_backbone` reads), None for random init.
        backbone: `build_resnet` keyword arguments of the encoder (its pretraining config's).
        data_root: Root of the evaluation data; None keeps the config's.
        work_dir: Where the probe's checkpoints and logs go.
        cfg_options: Further config overrides, e.g. {'train_cfg.max_epochs': 2}.

    Returns:
        {'settings': {...}, 'metrics': {'top1', 'top5', 'best_top1_selected_on_test'}}, the
        accuracies in percent on the evaluation split; top1/top5 are the final epoch's.

    Raises:
        FileNotFoundError, DataRootError, CheckpointMismatchError: Before any training.
    """
    allow_mmengine_checkpoints()
    cfg = load_linear_config(eval_config, checkpoint, backbone, data_root, work_dir, cfg_options)
    # Under torchrun (WORLD_SIZE > 1) the same CPU-process fix as tools/train.py.
    cfg.launcher = 'pytorch' if int(os.environ.get('WORLD_SIZE', '1')) > 1 else 'none'
    warning = configure_wandb(cfg)
    if warning and dist.is_main():
        print(warning, file=sys.stderr)
    setup_cpu_distributed(cfg, cfg.launcher)
    runner = Runner.from_cfg(cfg)
    history = ValHistory()
    runner.register_hook(history)
    try:
        runner.train()
    finally:
        forget_run_instances(runner)  # a later probe in this process gets its own
    last_epoch, final = history.history[-1] if history.history else (None, {})
    if last_epoch != cfg.train_cfg.max_epochs:
        raise RuntimeError(f'linear_paper: no validation after the final epoch '
                           f'{cfg.train_cfg.max_epochs} in {work_dir}; check val_cfg')
    metrics = {k: final[k] for k in ('top1', 'top5') if k in final}
    metrics['best_top1_selected_on_test'] = max(m['top1'] for _, m in history.history)
    return dict(settings=_settings(cfg, runner, eval_config), metrics=metrics)


def _settings(cfg: Config, runner: Runner, eval_config: str) -> dict:
    """The protocol's settings as run: schedule, effective lr and total batch, views, encoder."""
    model = dist.unwrap(runner.model)
    optimizer = cfg.optim_wrapper.optimizer
    train, val = cfg.train_dataloader, cfg.val_dataloader
    scheduler = cfg.param_scheduler[0]
    return dict(
        config=osp.basename(eval_config), epochs=cfg.train_cfg.max_epochs,
        optimizer=optimizer.type, lr=optimizer.lr,
        lr_effective=runner.optim_wrapper.param_groups[0]['initial_lr'],
        momentum=optimizer.get('momentum'), weight_decay=optimizer.get('weight_decay'),
        schedule=scheduler.type, milestones=list(scheduler.get('milestones', [])),
        gamma=scheduler.get('gamma'), batch=train.batch_size * runner.world_size,
        batch_per_process=train.batch_size, world_size=runner.world_size,
        view=train.dataset.view, test_view=val.dataset.view, input_size=train.dataset.input_size,
        backbone=dict(cfg.model.backbone), frozen_encoder='eval-mode BN, no grad',
        checkpoint_layout=model.checkpoint_layout or 'random-init',
        val_interval=cfg.train_cfg.get('val_interval', 1), reported='final epoch',
        eval_split=val.dataset.split, work_dir=cfg.work_dir)
