"""Export the encoder the evaluations use as a torchvision ResNet state dict, with a JSON sidecar.

The weights are what `tools/eval.py` evaluates for the same checkpoint and config (the query
encoder of our checkpoints, of the MixCo / MoCo authors', a torchvision state dict; or 'random',
the config's seeded random encoder), keyed as ``torchvision.models.resnet*()`` with ``fc`` an
identity. ``<weights>.json`` holds the line that builds that model, the stem, how the run's
evaluations feed it (`benchmark.data.eval_input`: input size, grey to RGB, resize, centre crop,
normalisation, and all of it as one torchvision expression) and the source checkpoint's sha256.
"""
import hashlib
import json
import os
import os.path as osp
from typing import List, Optional, Union

import torch
from mmengine.config import Config

from benchmark.data.eval_input import eval_dataset_cfg, eval_input
from benchmark.engine.checkpoints import (CheckpointError, CheckpointMismatchError,
                                          backbone_state, check_fits, checkpoint_candidates,
                                          read_checkpoint)
from benchmark.engine.config_file import read_config
from benchmark.layout import default_work_dir
from benchmark.names import DATA_NAMES, RANDOM_INIT
from methods.backbones import build_resnet

FORMATS = {'torchvision': '.pth', 'safetensors': '.safetensors'}  # format -> file extension
RANDOM = 'random'  # in place of a checkpoint: the seeded random encoder, as tools/eval.py
SMALL_STEM = ('m.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False); '
              'm.maxpool = torch.nn.Identity(); ')


def build_line(depth: int, small_stem: bool) -> str:
    """The line that builds ``m`` from torch and torchvision: `build_resnet(depth, small_stem)`."""
    return (f'm = torchvision.models.resnet{depth}(); {SMALL_STEM if small_stem else ""}'
            'm.fc = torch.nn.Identity()')


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def meta_config(checkpoint: str, loaded: object) -> Config:
    """The run's config our checkpoints keep in their meta (mmengine writes its text)."""
    text = (loaded.get('meta') or {}).get('cfg') if isinstance(loaded, dict) else None
    if not isinstance(text, str):
        raise ValueError(f'checkpoint {checkpoint} holds no config; pass its pretraining config '
                         'with --config')
    try:
        return Config.fromstring(text, '.py')
    except Exception as err:  # noqa: BLE001 - any failure: the config text cannot be read
        raise CheckpointError(f'its config does not read ({type(err).__name__}); pass --config',
                              checkpoint) from None


def input_of(cfg: Config, checkpoint: str) -> dict:
    """The sidecar's data, `eval_input` of `eval_dataset_cfg`: what the run's own evaluations
    (tools/eval.py without --eval-data) feed the encoder."""
    try:
        dataset = eval_dataset_cfg(cfg)
    except ValueError as err:
        where = 'the config' if checkpoint == RANDOM else f'the config of {checkpoint}'
        raise ValueError(f'{where}: {err}; pass the pretraining config with --config') from None
    return dict(data=DATA_NAMES.get(dataset['type'], dataset['type']), **eval_input(dataset))


def export_backbone(checkpoint: str, fmt: str, out: Optional[str] = None,
                    config: Union[None, str, Config] = None, force: bool = False) -> List[str]:
    """Write the encoder of ``checkpoint`` (a file, a work dir's newest, or 'random') in ``fmt`` to
    ``out`` (a file, or a folder for ``<checkpoint name>_backbone<ext>``; default: beside the
    checkpoint) and the sidecar ``<out>.json``. ``config`` (a path or a Config) gives depth, stem
    and seed; default: the checkpoint's own. Returns both paths; bad input is one line, before
    anything is written.
    """
    if checkpoint != RANDOM and osp.isdir(checkpoint):
        found = checkpoint_candidates(checkpoint)
        if not found:
            raise FileNotFoundError(f'work dir {checkpoint} holds no checkpoint (*.pth)')
        checkpoint = found[0]
    if fmt not in FORMATS:
        raise ValueError(f'export format {fmt!r} unknown; choose one of {", ".join(FORMATS)}')
    cfg = read_config(config) if isinstance(config, str) else config
    if checkpoint == RANDOM and cfg is None:
        raise ValueError("'random' needs --config: the encoder's depth, stem and seed come from it")
    name, folder = ((RANDOM_INIT, default_work_dir(cfg.filename or RANDOM)) if checkpoint == RANDOM
                    else (osp.splitext(osp.basename(checkpoint))[0], osp.dirname(checkpoint)))
    if not out or osp.isdir(out) or out.endswith(('/', os.sep)):
        out = osp.join(out or folder, f'{name}_backbone{FORMATS[fmt]}')
    for path in (out, f'{out}.json'):
        if osp.exists(path) and not force:
            raise FileExistsError(f'export output {path} exists already; pass --force to replace '
                                  'it or --out to write elsewhere')
    loaded = None if checkpoint == RANDOM else read_checkpoint(checkpoint)
    try:
        state = None if loaded is None else backbone_state(loaded)[1]
        cfg = meta_config(checkpoint, loaded) if cfg is None else cfg
        backbone = dict(depth=18, small_stem=False)
        backbone.update((cfg.get('model') or {}).get('backbone') or {})
        if backbone.get('width', 1) != 1:  # torchvision builds no narrowed ResNet by itself
            raise ValueError(f"export: model.backbone.width={backbone['width']} has no "
                             'torchvision builder; export an encoder of width 1')
        with torch.random.fork_rng(devices=[]):  # the random encoder, as `evaluate_checkpoint`'s
            torch.manual_seed(int((cfg.get('randomness') or {}).get('seed') or 0))
            model = build_resnet(**backbone)
        if state is not None:
            check_fits(model, state)  # a config of another depth or stem: one line
            model.load_state_dict(state, strict=True)
    except CheckpointMismatchError as err:
        raise CheckpointMismatchError(err.reason, checkpoint) from None
    sidecar = dict(build=build_line(backbone['depth'], backbone['small_stem']),
                   stem='small' if backbone['small_stem'] else 'imagenet',
                   **input_of(cfg, checkpoint),
                   checkpoint_sha256=None if loaded is None else sha256_of(checkpoint))
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    try:
        if fmt == 'safetensors':
            from safetensors.torch import save_file
            save_file(model.state_dict(), out)
        else:
            torch.save(model.state_dict(), out)
        with open(f'{out}.json', 'w') as handle:
            handle.write(json.dumps(sidecar, indent=1) + '\n')
    except BaseException:  # both files or neither: none half-written
        for path in (out, f'{out}.json'):
            if osp.exists(path):
                os.remove(path)
        raise
    return [out, f'{out}.json']


def export_run(work_dir_or_checkpoint: str, fmt: str, out_dir: Optional[str] = None, *,
               config: Union[None, str, Config] = None, force: bool = False) -> List[str]:
    """`export_backbone` into the folder ``out_dir`` (default: the checkpoint's folder)."""
    return export_backbone(work_dir_or_checkpoint, fmt, out_dir and osp.join(out_dir, ''), config,
                           force)
