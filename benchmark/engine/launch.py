"""From a config file and command-line choices to a checked config, before anything is built.

`load_config` applies overrides, the work dir, the launcher and what `--resume` continues from;
`check_data` fails on a missing or malformed data root before any model or data is built;
`config_identity` is the text a record's ``config_sha256`` hashes.
"""
import copy
import os.path as osp
import sys
from typing import Optional

from mmengine.config import Config
from mmengine.registry import DATASETS

from benchmark import dist
from benchmark.engine.config.views import fill_view_size
from benchmark.data.views import build_view
from benchmark.engine.checkpoints import choose_resume_checkpoint, loadable
from benchmark.engine.config.check import merge_options, read_config
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
    return cfg


# Where and how a run is placed, not what it computes: left out of its identity, so a resumed
# run, a torchrun and a SLURM launch and another work dir give one config_sha256.
PLACEMENT_KEYS = ('work_dir', 'launcher', 'resume', 'load_from')


def config_identity(cfg: Config) -> str:
    """The config's text without ``PLACEMENT_KEYS``: what a record's config_sha256 hashes.

    Take it from the config as `load_config` (or read + `--cfg-options`) returns it, before
    the run adds wandb run ids, backends or scaled learning rates to it. tools/train.py,
    tools/eval.py and tools/run_suite.py (which plans by this hash) agree through this function.
    """
    bare = copy.deepcopy(cfg)
    for key in PLACEMENT_KEYS:
        bare.pop(key, None)
    fill_view_size(bare)  # as load_config does, so tools/eval.py's configs hash the same
    return bare.pretty_text


def check_data(cfg: Config) -> None:
    """Fail on a missing or malformed data root before any model or data is built."""
    dataset = cfg.train_dataloader.dataset
    cls = DATASETS.get(dataset.type)
    if cls is None:
        raise ValueError(f'train_dataloader.dataset.type: unknown dataset {dataset.type!r}')
    cls.check_root(dataset.get('data_root', ''), dataset.get('split', 'train'))
    build_view(dataset.get('view', 'mocov2'), dataset.get('input_size', 224))
    if hasattr(cls, 'check_images'):  # decode every image file (cached)
        cls.check_images(dataset.get('data_root', ''), dataset.get('split', 'train'),
                         dataset.get('bad_data', 'strict'))
