"""Export the encoder the evaluations use as a plain torchvision ResNet state dict.

The exported weights are the query encoder (``backbone.*`` of this suite's checkpoints,
``encoder_q.*`` of the MixCo / MoCo authors', a torchvision state dict as it is; the seeded
random encoder of ``tools/eval.py CONFIG random``): what `evaluate_checkpoint` loads, picked by
the same `backbone_state`. The keys are torchvision's without the classifier ``fc.*`` (the
encoder ends at the pooled features), so a user builds the model, sets ``m.fc =
torch.nn.Identity()`` (and the small stem where the run had one) and loads with
``strict=True``; the recipe is written beside the weights and checked by loading into it
before anything is written.

Two files per export: the weights (``torchvision``: a ``torch.save``d state dict; or
``safetensors``) and ``<weights file>.json`` with the build recipe, the test-view
preprocessing, the run's config text and provenance (the checkpoint's path and sha256, epoch,
iteration, method, backbone, the git commit the run was started from, the records of the
checkpoint's evaluations). Both are written whole or not at all, and never over an existing
file unless ``force``.
"""
import datetime
import hashlib
import io
import json
import os
import os.path as osp
import re
from typing import Dict, List, Optional, Tuple, Union

import torch
import torchvision
from lightly.transforms.utils import IMAGENET_NORMALIZE  # the views' Normalize
from mmengine.config import Config
from torch import Tensor, nn

from benchmark.atomic_io import atomic_write, create_new
from benchmark.data.views import TEST_CROP_RATIO
from benchmark.engine.checkpoints import (CheckpointError, CheckpointMismatchError,
                                          backbone_state, check_fits, checkpoint_candidates,
                                          read_checkpoint)
from benchmark.engine.config.check import ConfigError, read_config
from benchmark.layout import RESULTS_DIR, default_work_dir, display_path
from benchmark.names import METHOD_NAMES, RANDOM_INIT
from benchmark.reports.provenance import git_state, package_versions
from benchmark.reports.records import load_records
from methods.backbones import build_resnet

FORMATS = {'torchvision': '.pth', 'safetensors': '.safetensors'}  # format -> file extension
RANDOM = 'random'  # in place of a checkpoint: the seeded random encoder, as tools/eval.py
# (bottleneck blocks, blocks per stage) -> depth of the torchvision ResNet
DEPTHS = {(False, (2, 2, 2, 2)): 18, (False, (3, 4, 6, 3)): 34, (True, (3, 4, 6, 3)): 50}
FEATURE_DIMS = {18: 512, 34: 512, 50: 2048}  # channels of the pooled features
NO_FC = 'not exported: the encoder ends at the pooled features (m.fc = torch.nn.Identity())'
SMALL_STEM = ('m.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False); '
              'm.maxpool = torch.nn.Identity(); ')
LOADS = {'torchvision': "m.load_state_dict(torch.load('{name}', weights_only=True))",
         'safetensors': "m.load_state_dict(safetensors.torch.load_file('{name}'))"}


def build_statement(depth: int, small_stem: bool) -> str:
    """The Python line that builds the exported encoder as ``m`` from torch and torchvision
    alone: `methods.backbones.build_resnet(depth, small_stem)`'s module."""
    return (f'm = torchvision.models.resnet{depth}(); {SMALL_STEM if small_stem else ""}'
            'm.fc = torch.nn.Identity()')


def build_from_statement(statement: str) -> nn.Module:
    """The module ``m`` a `build_statement` line builds."""
    scope = {'torch': torch, 'torchvision': torchvision}
    exec(statement, scope)  # noqa: S102 - our own recipe line, the one the sidecar shows
    return scope['m']


def resnet_recipe(state: Dict[str, Tensor]) -> Tuple[int, bool]:
    """(depth, small_stem) of the torchvision ResNet a backbone state dict is, from its shapes.

    Raises:
        CheckpointMismatchError: It is not a ResNet-18/34/50 of either stem.
    """
    conv1 = state.get('conv1.weight')
    kernel = tuple(conv1.shape[2:]) if torch.is_tensor(conv1) and conv1.dim() == 4 else None
    if kernel not in ((7, 7), (3, 3)):
        raise CheckpointMismatchError(
            'its backbone is not a torchvision ResNet (no conv1.weight with a 7x7 or 3x3 '
            'kernel); only ResNet-18/34/50 backbones export')
    blocks = tuple(len({k.split('.')[1] for k in state if k.startswith(f'layer{i}.')})
                   for i in range(1, 5))
    depth = DEPTHS.get(('layer1.0.conv3.weight' in state, blocks))
    if depth is None:
        raise CheckpointMismatchError(
            f'its backbone is not a ResNet-18/34/50 (blocks per stage {list(blocks)}); only '
            'those export')
    return depth, kernel == (3, 3)


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def encode_weights(state: Dict[str, Tensor], fmt: str, metadata: Dict[str, str]) -> bytes:
    """The bytes of the weights file: ``torch.save`` of the state dict, or safetensors."""
    if fmt == 'safetensors':
        from safetensors.torch import save
        return save(state, metadata=metadata)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def write_file(path: str, data: bytes, force: bool) -> str:
    """Write ``path`` whole: never over a file (`create_new`), or replacing it with ``force``;
    readable as a file ``open`` creates (the process's umask), not only by its owner."""
    def write(tmp: str) -> None:
        with open(tmp, 'wb') as handle:
            handle.write(data)
    if force:
        atomic_write(path, write)
    else:
        create_new(path, data)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)
    return path


def require_format(fmt: str) -> str:
    """The file extension of ``fmt``; one line if the format is unknown or cannot be written."""
    if fmt not in FORMATS:
        raise ValueError(f'export format {fmt!r} unknown; choose one of {", ".join(FORMATS)}')
    if fmt == 'safetensors':
        try:
            import safetensors.torch  # noqa: F401
        except ImportError:
            raise ValueError('export format safetensors needs the safetensors package: '
                             'pip install safetensors') from None
    return FORMATS[fmt]


def sidecar_path(weights: str) -> str:
    """The JSON beside an exported weights file: its name plus ``.json``."""
    return f'{weights}.json'


def resolve_checkpoint(source: str) -> str:
    """The checkpoint a file, a work dir (its newest checkpoint: `last_checkpoint`, else by
    time) or 'random' names; one line if there is none."""
    if source == RANDOM or osp.isfile(source):
        return source
    if osp.isdir(source):
        found = checkpoint_candidates(source)
        if not found:
            raise FileNotFoundError(f'work dir {source} holds no checkpoint (*.pth); train the '
                                    'run first or pass a checkpoint file')
        return found[0]
    raise FileNotFoundError(f'checkpoint {source} not found; pass a checkpoint file, a work '
                            "dir or 'random' (with --config)")


def default_output(checkpoint: str, fmt: str, config: Optional[str] = None,
                   out_dir: Optional[str] = None) -> str:
    """``<out dir>/<checkpoint name>_backbone<ext>``; the checkpoint's folder by default (for
    'random': ``random_init_backbone<ext>`` in the config's work dir)."""
    if checkpoint == RANDOM:
        name, folder = RANDOM_INIT, default_work_dir(config or 'random')
    else:
        name, folder = osp.splitext(osp.basename(checkpoint))[0], osp.dirname(checkpoint)
    return osp.join(out_dir if out_dir is not None else folder,
                    f'{name}_backbone{FORMATS[fmt]}')


def check_outputs(weights: str, force: bool) -> List[str]:
    """[weights, sidecar]; one line if one exists already and ``force`` is off."""
    paths = [weights, sidecar_path(weights)]
    for path in paths:
        if osp.isdir(path):
            raise IsADirectoryError(f'export output {path} is a folder; give a file name')
        if osp.exists(path) and not force:
            raise FileExistsError(f'export output {path} exists already; pass --force to '
                                  'replace it or --out to write elsewhere')
    return paths


def config_facts(cfg: Optional[Config]) -> dict:
    """What a run's config says about its encoder and its evaluations' inputs."""
    if cfg is None:
        return {}
    if not isinstance(cfg.get('model'), dict) or 'type' not in cfg.model:
        raise ConfigError(f'config {cfg.filename}: no model section with a type; pass the '
                          'pretraining config of the checkpoint')
    backbone = dict(cfg.model.get('backbone') or {})
    size = int(((cfg.get('train_dataloader') or {}).get('dataset') or {}).get('input_size', 224))
    return dict(method=METHOD_NAMES.get(cfg.model.type, cfg.model.type),
                depth=int(backbone.get('depth', 18)),
                small_stem=bool(backbone.get('small_stem', False)),
                seed=int(cfg.get('randomness', {}).get('seed', 0) or 0),
                input_size=size, resize=round(size / TEST_CROP_RATIO))


def preprocess_of(facts: dict) -> Optional[dict]:
    """The evaluations' test view (resize, centre crop, ImageNet normalisation) as torchvision
    transforms, for the run's input size; None without a config."""
    if 'input_size' not in facts:
        return None
    t, mean, std = 'torchvision.transforms', IMAGENET_NORMALIZE['mean'], IMAGENET_NORMALIZE['std']
    return dict(input_size=facts['input_size'], resize=facts['resize'], mean=mean, std=std,
                transform=(f"{t}.Compose([{t}.Resize({facts['resize']}), "
                           f"{t}.CenterCrop({facts['input_size']}), {t}.ToTensor(), "
                           f'{t}.Normalize(mean={mean}, std={std})])'))


def meta_config(meta: dict, checkpoint: str) -> Optional[Config]:
    """The run's config kept in one of our checkpoints' meta (mmengine writes its text)."""
    text = meta.get('cfg')
    if not isinstance(text, str):
        return None
    try:
        return Config.fromstring(text, '.py')
    except Exception as err:  # noqa: BLE001 - any failure: the config text cannot be read
        raise CheckpointError(f'the config text in its meta does not read ({type(err).__name__})'
                              '; pass --config', checkpoint) from None


def records_of(checkpoint: str, results_dir: Optional[str]) -> List[dict]:
    """id, time, git state and versions of the records in ``results_dir`` that evaluated
    ``checkpoint`` (the same file)."""
    if not results_dir or not osp.isdir(results_dir) or checkpoint == RANDOM:
        return []
    found = []
    for record in load_records(results_dir):
        path = record.get('checkpoint')
        if path and osp.isfile(path) and osp.samefile(path, checkpoint):
            found.append({k: record.get(k) for k in ('id', 'created', 'git', 'versions')})
    return found


def training_stamp(meta: dict) -> dict:
    """mmengine's version stamp in checkpoint meta is its version followed by the commit of the
    git checkout the run was started in: the two apart."""
    stamp = meta.get('mmengine_version')
    if not isinstance(stamp, str):
        return {}
    found = re.fullmatch(r'(.*?)([0-9a-f]{40})?', stamp)
    return dict(mmengine=found.group(1), git_commit=found.group(2))


def config_record(meta: dict, given: Optional[Config], path: Optional[str]) -> dict:
    """The run's config text and where it came from: the checkpoint's meta (ours keep the
    config they ran with), else the config given."""
    if isinstance(meta.get('cfg'), str):
        return dict(source='checkpoint meta', text=meta['cfg'])
    if given is not None:
        return dict(source=display_path(path) if path else None, text=given.pretty_text)
    return dict(source=None, text=None)


def provenance(checkpoint: str, meta: dict, layout: str, run_cfg: Optional[Config], arch: str,
               results_dir: Optional[str]) -> dict:
    """Where the weights come from: the checkpoint (path, sha256, layout, epoch, iteration),
    the run (method, seed, processes, the git commit it was started from), its records, and
    this export (time, git state, package versions)."""
    facts = config_facts(run_cfg)
    method = facts.get('method')
    if checkpoint == RANDOM:
        method = RANDOM_INIT
    elif method and layout != 'mixco-bench':
        method = f'{method} ({layout})'  # as tools/eval.py names it
    mine = checkpoint != RANDOM
    return dict(checkpoint=osp.abspath(checkpoint) if mine else None,
                checkpoint_sha256=sha256_of(checkpoint) if mine else None,
                layout=layout, method=method, backbone=arch,
                **{k: meta.get(k) for k in ('epoch', 'iter', 'time', 'experiment_name',
                                           'world_size', 'total_batch', 'key_bn')},
                seed=meta.get('seed', facts.get('seed')),
                training=training_stamp(meta), records=records_of(checkpoint, results_dir),
                exported=dict(time=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                              git=git_state(), versions=package_versions()))


def source_state(checkpoint: str, cfg: Optional[Config]) -> Tuple[Dict[str, Tensor], dict, str]:
    """(backbone state dict, meta, layout) of a checkpoint file, or of the seeded random
    encoder of ``cfg`` (`evaluate_checkpoint`'s: the config's seed, then `build_resnet`)."""
    if checkpoint == RANDOM:
        facts = config_facts(cfg)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(facts['seed'])
            net = build_resnet(depth=facts['depth'], small_stem=facts['small_stem'])
        return net.state_dict(), {}, 'random-init'
    loaded = read_checkpoint(checkpoint)
    try:
        layout, state = backbone_state(loaded)
    except CheckpointMismatchError as err:
        raise CheckpointMismatchError(err.reason, checkpoint) from None
    meta = loaded.get('meta', {}) if isinstance(loaded, dict) else {}
    return state, meta if isinstance(meta, dict) else {}, layout


def export_backbone(checkpoint: str, fmt: str, out: Optional[str] = None,
                    config: Union[None, str, Config] = None, force: bool = False,
                    results_dir: Optional[str] = RESULTS_DIR) -> List[str]:
    """Export the evaluated encoder of ``checkpoint`` (a file or 'random') in ``fmt``.

    Args:
        checkpoint: A checkpoint file (any layout `tools/eval.py` reads) or 'random'.
        fmt: 'torchvision' or 'safetensors'.
        out: The weights file (default: `default_output`); a folder (existing, or ending in
            a slash): that name in it.
        config: The run's config (a path or a read Config); needed for 'random' and where the
            checkpoint holds none (ours keep theirs in their meta). Its backbone must be the
            checkpoint's.
        force: Replace existing output files.
        results_dir: Where to look for the records of this checkpoint (None: nowhere).

    Returns:
        [weights path, sidecar JSON path].

    Raises:
        ValueError, OSError: Bad input, one line, before anything is written.
    """
    require_format(fmt)
    config_path = config if isinstance(config, str) else getattr(config, 'filename', None)
    if checkpoint == RANDOM and config is None:
        raise ValueError("exporting 'random' needs --config (the encoder's depth, stem, seed)")
    if checkpoint != RANDOM and not osp.isfile(checkpoint):
        raise FileNotFoundError(f'checkpoint {checkpoint} not found')
    if out is None or osp.isdir(out) or out.endswith(('/', os.sep)):
        out = default_output(checkpoint, fmt, config_path, out)
    paths = check_outputs(out, force)
    given = read_config(config) if isinstance(config, str) else config
    state, meta, layout = source_state(checkpoint, given)
    run_cfg = meta_config(meta, checkpoint) or given
    depth, small = resnet_recipe(state)
    build = build_statement(depth, small)
    model = build_from_statement(build)
    try:
        check_fits(model, state)
    except CheckpointMismatchError as err:
        raise CheckpointMismatchError(err.reason, checkpoint) from None
    for cfg, where in ((given, config_path or 'config'), (run_cfg, 'the checkpoint meta config')):
        facts = config_facts(cfg)
        if facts and (facts['depth'], facts['small_stem']) != (depth, small):
            raise ConfigError(f'{where}: its backbone is resnet{facts["depth"]} '
                              f'(small_stem={facts["small_stem"]}) but the checkpoint holds '
                              f'resnet{depth} (small_stem={small}); pass the run\'s config')
    # torchvision's key order, plain contiguous CPU tensors (no shared or channels-last storage)
    weights = {k: state[k].detach().cpu().clone(memory_format=torch.contiguous_format)
               for k in model.state_dict()}
    model.load_state_dict(weights, strict=True)  # the recipe the sidecar shows takes them
    arch, stem = f'resnet{depth}', 'small' if small else 'imagenet'
    name = osp.basename(paths[0])
    data = encode_weights(weights, fmt, dict(format='pt', arch=arch, stem=stem, build=build))
    sidecar = dict(format=fmt, weights=name, weights_sha256=hashlib.sha256(data).hexdigest(),
                   arch=arch, stem=stem, feature_dim=FEATURE_DIMS[depth], build=build,
                   load=LOADS[fmt].format(name=name), fc=NO_FC,
                   preprocess=preprocess_of(config_facts(run_cfg)),
                   config=config_record(meta, given, config_path),
                   provenance=provenance(checkpoint, meta, layout, run_cfg, arch, results_dir))
    text = json.dumps(sidecar, indent=1, allow_nan=False) + '\n'
    write_file(paths[0], data, force)
    try:
        write_file(paths[1], text.encode(), force)
    except BaseException:  # no weights without their recipe and provenance
        os.remove(paths[0])
        raise
    return paths


def export_run(work_dir_or_checkpoint: str, fmt: str, out_dir: Optional[str] = None, *,
               config: Union[None, str, Config] = None, force: bool = False,
               results_dir: Optional[str] = RESULTS_DIR) -> List[str]:
    """Export a run's encoder: its work dir's newest checkpoint, or a checkpoint file.

    Writes ``<checkpoint name>_backbone.<pth|safetensors>`` and its ``.json`` into ``out_dir``
    (default: the checkpoint's folder). Returns [weights path, sidecar JSON path].
    """
    require_format(fmt)
    checkpoint = resolve_checkpoint(work_dir_or_checkpoint)
    cfg_path = config if isinstance(config, str) else getattr(config, 'filename', None)
    return export_backbone(checkpoint, fmt, default_output(checkpoint, fmt, cfg_path, out_dir),
                           config, force, results_dir)
