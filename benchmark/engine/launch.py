"""From a config file and command-line choices to a checked config, before anything is built.

`load_config` applies overrides, the work dir, the launcher and what `--resume` continues from;
`prepare_run` turns a training run's arguments into a `PreparedRun`, each step in the module
that owns it, in this order: the config read (config_file), its views placed (train_views), the
config checked (config.check), the work dir held (work_dir_lock), the resume checkpoint chosen
(checkpoints), the identity taken from the config as declared (config_text), the loader pinned,
the prefetch loop and channels-last set, the data checked, wandb decided (tracking) and the
process set up (compat); `build_runner` builds its Runner and `end_run` gives up what the run
held. `check_data` fails on a missing or malformed data root before any model or data is built.
"""
import copy
import os
import os.path as osp
import sys
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from mmengine.config import Config
from mmengine.registry import DATASETS
from mmengine.runner import Runner

from benchmark import dist
from benchmark.data.views import build_view
from benchmark.engine import held_signals
from benchmark.engine.channels_last import use_channels_last_wrapper
from benchmark.engine.checkpoints import check_resume_fits, choose_resume_checkpoint, loadable
from benchmark.engine.compat import (allow_mmengine_checkpoints, forget_run_instances,
                                     setup_cpu_distributed)
from benchmark.engine.config.check import validate_config
from benchmark.engine.config_file import merge_options, read_config
from benchmark.engine.config_text import config_identity, config_setting, formatted
from benchmark.engine.preemption import PreemptionHook
from benchmark.engine.prefetch_loop import use_prefetch_loop
from benchmark.engine.progress import ProgressHook
from benchmark.engine.tracking import configure_wandb
from benchmark.engine.train_views import fill_view_size, place_views
from benchmark.engine.work_dir_lock import (RESUME_WAIT_S, check_work_dir_free, hold_work_dir,
                                            release_work_dir)
from benchmark.layout import default_work_dir


def load_config(config: str, cfg_options: Optional[dict] = None, work_dir: Optional[str] = None,
                launcher: str = 'none', resume: Optional[str] = None) -> Config:
    """The config with command-line overrides applied, work dir, launcher and resume set.

    Args:
        config: The config file.
        cfg_options: `--cfg-options` KEY=VALUE pairs, parsed.
        work_dir: `--work-dir` (default: the config's, else work_dirs/<config stem>).
        launcher: 'none', 'pytorch' or 'slurm'.
        resume: None, 'auto' (the newest loadable checkpoint of the work dir) or a path.
    """
    cfg = read_config(config)
    merge_options(cfg, cfg_options or {})
    fill_view_size(cfg)  # views on the device: their size follows the dataset's input_size
    if work_dir:
        cfg.work_dir = work_dir
    elif not cfg.get('work_dir'):
        cfg.work_dir = default_work_dir(config)
    cfg.launcher = launcher
    choose_resume(cfg, resume)
    return cfg


def choose_resume(cfg: Config, resume: Optional[str]) -> None:
    """Set ``cfg.resume`` and ``cfg.load_from`` from `--resume`: None, 'auto' (the newest
    loadable checkpoint of the work dir) or a path."""
    if resume == 'auto':
        path, messages = choose_resume_checkpoint(cfg.work_dir)
        if dist.is_main():
            for line in messages:
                print(f'resume: {line}', file=sys.stderr)
        cfg.resume, cfg.load_from = path is not None, path
    elif resume:
        reason = loadable(resume) if osp.isfile(resume) else 'no such file'
        if reason:
            raise ValueError(f'--resume {resume}: cannot load it ({reason}); '
                             'pass another checkpoint or --resume alone for the newest loadable')
        cfg.resume, cfg.load_from = True, resume


def pin_batches(cfg: Config, cuda: bool) -> None:
    """On CUDA the training loader pins its batches (``pin_memory=True`` unless the config sets
    it): a copy from pageable memory to the GPU waits until the GPU has finished the work queued
    before it, here the last step, so the host could not run ahead."""
    loader = cfg.get('train_dataloader')
    if cuda and isinstance(loader, dict) and loader.get('pin_memory') is None:
        loader['pin_memory'] = True


def check_data(cfg: Config, decode_images: bool = True) -> None:
    """Fail on a missing or malformed data root before any model or data is built; with
    ``decode_images``, on image files that do not decode too (a scan cached in the root)."""
    dataset = cfg.train_dataloader.dataset
    cls = DATASETS.get(dataset.type)
    if cls is None:
        raise ValueError(f'train_dataloader.dataset.type: unknown dataset {dataset.type!r}')
    cls.check_root(dataset.get('data_root', ''), dataset.get('split', 'train'))
    build_view(dataset.get('view', 'mocov2'), dataset.get('input_size', 224))
    if decode_images and hasattr(cls, 'check_images'):  # decode every image file (cached)
        cls.check_images(dataset.get('data_root', ''), dataset.get('split', 'train'),
                         dataset.get('bad_data', 'strict'))


@dataclass
class PreparedRun:
    """A training run ready for ``Runner.from_cfg(run.cfg)``: its checked config, its identity
    (taken before the run edits the config), the checkpoint it resumes from, where its views are
    drawn, its work dir (held by this process) and wandb's warning (None: as configured)."""
    cfg: Config
    identity: Dict[str, Any]
    resume: Optional[str]
    views: str
    work_dir: str
    wandb_warning: Optional[str]


def load_checked(args: Any,
                 resume_wait_s: float = RESUME_WAIT_S) -> Tuple[Config, Config, str]:
    """tools/train.py's config from its parsed arguments, its views placed (`place_views`) and
    checked (`validate_config`); with ``args.check_only`` (dist_train.sh's check) its work dir
    found free as well. A --resume waits up to `resume_wait_s` for the work dir's holder (a
    stopped job may still be saving). Returns the config, the config as declared (its identity's:
    the views not yet placed) and the views path. Raises WorkDirBusy, or bad input (ValueError,
    OSError, KeyError, TypeError) as one line."""
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.launcher)
    declared = copy.deepcopy(cfg)
    views = place_views(cfg, torch.cuda.is_available())  # train_views='auto': on a GPU, there
    validate_config(cfg)  # the world size comes from torchrun's WORLD_SIZE
    if args.check_only and os.environ.get('NODE_RANK', '0') == '0':  # node 0's trainer holds it
        check_work_dir_free(cfg.work_dir, resume_wait_s if args.resume else 0.0)
    return cfg, declared, views


def prepare_run(args: Any, resume_wait_s: float = RESUME_WAIT_S) -> Optional[PreparedRun]:
    """tools/train.py's parsed arguments to a `PreparedRun` (`load_checked` first); None with
    ``args.check_only``."""
    cfg, declared, views = load_checked(args, resume_wait_s)
    if args.check_only:
        return None
    hold_work_dir(cfg.work_dir, resume_wait_s if args.resume else 0.0)  # rank 0, until exit
    choose_resume(cfg, args.resume)  # once the work dir is ours (another may be writing there)
    identity = dict(config_text=config_identity(declared),
                    setting=config_setting(declared, args.config))
    cfg = formatted(cfg)  # the Runner's: its text formatted once, not at every checkpoint
    pin_batches(cfg, torch.cuda.is_available())
    use_prefetch_loop(cfg)  # device views: the next batch's drawn while the step runs
    use_channels_last_wrapper(cfg)  # DDP wraps an NHWC model (bit-identical resume)
    check_data(cfg)
    warning = configure_wandb(cfg, say=True)
    allow_mmengine_checkpoints()  # the Runner loads a --resume or load_from checkpoint
    setup_cpu_distributed(cfg, args.launcher)
    return PreparedRun(cfg, identity, cfg.load_from if cfg.get('resume') else None, views,
                       cfg.work_dir, warning)


def build_runner(args: Any, resume_wait_s: float = RESUME_WAIT_S) -> Tuple[Any, Optional[dict]]:
    """tools/train.py's Runner of the prepared run (a --resume checkpoint checked against its
    model before any data is read, progress reported) and its identity; (None, None) with
    ``args.check_only``. Held stop signals get their default action back unless a
    PreemptionHook will take them over."""
    run = prepare_run(args, resume_wait_s)
    if run is None:
        return None, None
    runner = Runner.from_cfg(run.cfg)
    if run.resume:  # the model exists, the data does not yet
        check_resume_fits(runner.model, run.resume)
    runner.register_hook(ProgressHook())  # epoch, ETA and progress.json; not a config key
    if not any(isinstance(hook, PreemptionHook) for hook in runner.hooks):
        held_signals.release()  # nothing will take a held signal over: its default action
    return runner, run.identity


def end_run(runner: Any) -> None:
    """Give up the run's work dir and its mmengine instances (a later run here gets its own)."""
    release_work_dir(runner.cfg.work_dir)
    forget_run_instances(runner)
