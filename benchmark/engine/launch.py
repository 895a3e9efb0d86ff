"""From a config file and command-line choices to a checked config, before anything is built.

`load_config` applies overrides, the work dir, the launcher and what `--resume` continues from;
`prepare_run` turns a training run's arguments into a `PreparedRun`, in this order: the config
loaded and checked, the work dir held, the resume checkpoint chosen, the identity taken, the
views placed, the data checked, wandb decided, distributed training set up; `build_runner`
builds its Runner and `end_run` gives up what the run held;
`check_data` fails on a missing or malformed data root before any model or data is built;
`config_identity` is the text a record's ``config_sha256`` hashes; `config_setting` is what
its ``setting_sha256`` and ``overrides`` come from (the same config without seed and data paths,
and where it departs from its file).
"""
import copy
import json
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
from benchmark.engine.config_text import pretty_text
from benchmark.engine.preemption import PreemptionHook
from benchmark.engine.prefetch_loop import use_prefetch_loop
from benchmark.engine.progress import ProgressHook
from benchmark.engine.tracking import configure_wandb
from benchmark.engine.train_views import fill_view_size, resolve_train_views
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


# Where and how a run is placed, not what it computes: left out of its identity, so a resumed
# run, a torchrun and a SLURM launch and another work dir give one config_sha256.
PLACEMENT_KEYS = ('work_dir', 'launcher', 'resume', 'load_from')
# Bookkeeping that never changes what a run computes, left out of its identity as well, so that
# the runtime's logging machinery can change without finished runs reading as other configs.
# Only keys added to the shipped configs after identities existed belong here (adding a key that
# older records hashed would make those records look like other configs).
BOOKKEEPING_KEYS = ('default_hooks.runtime_info',)


def _drop_bookkeeping(cfg: Config) -> None:
    for key in BOOKKEEPING_KEYS:
        *parents, leaf = key.split('.')
        node = cfg
        for part in parents:
            node = node.get(part) if hasattr(node, 'get') else None
            if node is None:
                break
        if node is not None and hasattr(node, 'pop'):
            node.pop(leaf, None)


def config_identity(cfg: Config) -> str:
    """The config's text without ``PLACEMENT_KEYS`` and ``BOOKKEEPING_KEYS``: what a record's
    config_sha256 hashes.

    Take it from the config as `load_config` (or read + `--cfg-options`) returns it, before
    the run adds wandb run ids, backends or scaled learning rates to it. tools/train.py,
    tools/eval.py and tools/run_suite.py (which plans by this hash) agree through this function.
    """
    bare = copy.deepcopy(cfg)
    for key in PLACEMENT_KEYS:
        bare.pop(key, None)
    _drop_bookkeeping(bare)
    fill_view_size(bare)  # as load_config does, so tools/eval.py's configs hash the same
    return pretty_text(bare)


# Not part of a run's setting: its seed (one setting is measured over seeds) and where its data
# lies on this machine (a dotted key ending in one of these names, at any depth).
SEED_KEY = 'randomness.seed'
PATH_NAMES = ('data_root',)


def flat_items(tree: Any, prefix: str = '') -> Dict[str, Any]:
    """{dotted key: value} of the dicts in `tree`; lists and other values are leaves."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree} if prefix else {}
    out: Dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flat_items(value, f'{prefix}.{key}' if prefix else str(key)))
    return out


def _text(value: Any) -> str:
    """How a value is written: 1 and 1.0 (or True and 1) differ, as they do in the config text."""
    return json.dumps(value, default=repr, sort_keys=True)


def _plain(value: Any) -> Any:
    """A JSON value (tuples as lists, other objects as their repr)."""
    return json.loads(json.dumps(value, default=repr))


def _is_setting(key: str) -> bool:
    return (key != SEED_KEY and key.split('.')[0] not in PLACEMENT_KEYS
            and not any(key == b or key.startswith(b + '.') for b in BOOKKEEPING_KEYS)
            and key.rsplit('.', 1)[-1] not in PATH_NAMES)


def config_setting(cfg: Config, config_file: Optional[str] = None) -> Dict[str, Any]:
    """What a run measures, apart from its seed: {'text', 'overrides'}.

    ``text``: the config without placement keys, seed and data roots (records hash it with the
    world size into ``setting_sha256``: runs of one setting share it across seeds, machines and
    work dirs). ``overrides``: {dotted key: value} where the config departs from `config_file`
    as shipped (default: ``cfg.filename``), e.g. ``{'model.mix_temperature': 0.1}``; the seed
    and placement are left out. Take it where `config_identity` is taken.
    """
    bare = copy.deepcopy(cfg)
    for key in PLACEMENT_KEYS:
        bare.pop(key, None)
    fill_view_size(bare)
    mine = {k: v for k, v in flat_items(bare.to_dict()).items() if _is_setting(k)}
    kept: Dict[str, Any] = {}
    for key, value in mine.items():  # rebuild without the left-out keys, in the config's order
        node = kept
        *parents, leaf = key.split('.')
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    text = pretty_text(kept)
    overrides: Dict[str, Any] = {}
    source = config_file or cfg.filename
    if source and osp.isfile(source):
        shipped = Config.fromfile(source, import_custom_modules=False)
        fill_view_size(shipped, like=bare)  # its size follows the run's: input_size=N, one override
        theirs = {k: v for k, v in flat_items(shipped.to_dict()).items() if _is_setting(k)}
        overrides = {k: _plain(v) for k, v in mine.items()
                     if k not in theirs or _text(theirs[k]) != _text(v)}
        # A key gone from the config, unless a value replaced it or its parent (view=simclr
        # for view=dict(...) is one override, not one per key of the dict).
        overrides.update({k: None for k in theirs if k not in mine
                          and not any(_nested(k, m) or _nested(m, k) for m in mine)})
    return dict(text=text, overrides=overrides)


def _nested(inner: str, outer: str) -> bool:
    return inner.startswith(outer + '.')


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


def load_checked(args: Any, resume_wait_s: float = RESUME_WAIT_S) -> Config:
    """tools/train.py's config from its parsed arguments, checked (`validate_config`); with
    ``args.check_only`` (dist_train.sh's check) its work dir found free as well. A --resume
    waits up to `resume_wait_s` for the work dir's holder (a stopped job may still be saving).
    Raises WorkDirBusy, or bad input (ValueError, OSError, KeyError, TypeError) as one line."""
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.launcher)
    validate_config(cfg)  # the world size comes from torchrun's WORLD_SIZE
    if args.check_only and os.environ.get('NODE_RANK', '0') == '0':  # node 0's trainer holds it
        check_work_dir_free(cfg.work_dir, resume_wait_s if args.resume else 0.0)
    return cfg


def prepare_run(args: Any, resume_wait_s: float = RESUME_WAIT_S) -> Optional[PreparedRun]:
    """tools/train.py's parsed arguments to a `PreparedRun` (`load_checked` first); None with
    ``args.check_only``."""
    cfg = load_checked(args, resume_wait_s)
    if args.check_only:
        return None
    wait_s = resume_wait_s if args.resume else 0.0
    hold_work_dir(cfg.work_dir, wait_s)  # rank 0, until this process ends: one trainer per dir
    choose_resume(cfg, args.resume)  # once the work dir is ours (another may be writing there)
    identity = dict(config_text=config_identity(cfg), setting=config_setting(cfg, args.config))
    cuda = torch.cuda.is_available()
    views = resolve_train_views(cfg, cuda)  # train_views='auto': on a GPU, there
    pin_batches(cfg, cuda)
    use_prefetch_loop(cfg)  # device views: the next batch's drawn while the step runs
    use_channels_last_wrapper(cfg)  # DDP wraps an NHWC model (bit-identical resume)
    check_data(cfg)
    warning = configure_wandb(cfg)
    if warning and dist.is_main():
        print(warning, file=sys.stderr)
    setup_cpu_distributed(cfg, args.launcher)
    return PreparedRun(cfg, identity, cfg.load_from if cfg.get('resume') else None, views,
                       cfg.work_dir, warning)


def build_runner(args: Any, resume_wait_s: float = RESUME_WAIT_S) -> Tuple[Any, Optional[dict]]:
    """tools/train.py's Runner of the prepared run (a --resume checkpoint checked against its
    model before any data is read, progress reported) and its identity; (None, None) with
    ``args.check_only``. Held stop signals get their default action back unless a
    PreemptionHook will take them over."""
    allow_mmengine_checkpoints()  # before a --resume checkpoint is chosen
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
