"""Read checkpoints: a pretrained backbone from the layouts researchers have (strictly), the meta
block, and the checkpoint `--resume` continues from (the newest one that loads).

Layouts: this suite's mmengine checkpoints (`state_dict` with `backbone.*`), the MixCo / MoCo
authors' checkpoints (`state_dict` with `module.encoder_q.*`, the MLP head under `fc.*`), and
plain torchvision ResNet state dicts (`conv1.weight`, ..., `fc.*`). Loading goes through
torch's weights-only unpickler: a checkpoint is never allowed to run code.
"""
import glob
import os.path as osp
import pickle
import re
import warnings
import zipfile
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn

from benchmark.dist import unwrap
from benchmark.engine.compat import allow_mmengine_checkpoints
from benchmark.layout import LAST_CHECKPOINT

LAYOUTS = {  # layout name -> prefix of the backbone keys
    'mixco-bench': 'backbone.',
    'moco-authors': 'module.encoder_q.',
    'moco-authors-single-gpu': 'encoder_q.',
    'torchvision': '',
}


class CheckpointError(ValueError):
    """A checkpoint file cannot be used: one line, ``checkpoint PATH: REASON``.

    Attributes:
        reason: What is wrong, without the path (for callers that name the file their way).
        path: The file, or None where it is not known yet.
    """

    def __init__(self, reason: str, path: Optional[str] = None) -> None:
        self.reason, self.path = reason, path
        super().__init__(f'checkpoint {path}: {reason}' if path else reason)


class CheckpointMismatchError(CheckpointError):
    """A checkpoint does not fit the backbone it is loaded into."""


def _first_line(err: BaseException) -> str:
    """The first sentence of an error's message (torch's run to a dozen lines)."""
    text = str(err).strip()
    if 'WeightsUnpickler error:' in text:  # the cause, not torch's advice around it
        text = text.split('WeightsUnpickler error:', 1)[1].strip()
    first = text.splitlines()[0].split('. ')[0] if text else type(err).__name__
    return first[:160]


def _refused_global(message: str) -> Optional[str]:
    """The global a weights-only refusal names ('posix.system', '__main__.Foo'), if any."""
    found = re.search(r'GLOBAL ([\w.]+)', message)
    return found.group(1) if found else None


def _load_reason(path: str) -> Tuple[Any, Optional[str]]:
    """(loaded object, None), or (None, why the file cannot be loaded weights-only)."""
    if not osp.exists(path):
        return None, 'not found'
    if osp.isdir(path):
        return None, 'is a folder; pass a .pth file inside it'
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols before refusing
            warnings.simplefilter('ignore')
            return torch.load(path, map_location='cpu', weights_only=True), None
    except pickle.UnpicklingError as err:
        name = _refused_global(str(err))
        if name:
            return None, (f'refusing to load: it asks for {name}; only weights are loaded '
                          '(re-save it as a plain state dict)')
        if not _torch_zip(path):
            return None, ('not a torch checkpoint (its pickle is not plain weights: '
                          f'{_first_line(err)})')
        return None, _corrupt(err)
    except Exception as err:  # noqa: BLE001 - torch's readers fail in a dozen ways on bad bytes
        if osp.getsize(path) == 0:
            return None, 'is empty; copy it again or pick another'
        if _torch_zip(path) or isinstance(err, zipfile.BadZipFile):
            return None, _corrupt(err)
        return None, f'not a torch checkpoint ({type(err).__name__}: {_first_line(err)})'


def _torch_zip(path: str) -> bool:
    """Whether the file starts as torch.save's zip archives do."""
    with open(path, 'rb') as handle:
        return handle.read(4) == b'PK\x03\x04'


def _corrupt(err: BaseException) -> str:
    return (f'truncated or corrupt ({type(err).__name__}: {_first_line(err)}); copy it again or '
            'pick another')


def read_checkpoint(path: str) -> Any:
    """`torch.load(path, weights_only=True)` with every way a file can be bad as one line.

    Raises:
        CheckpointError: Missing file, a folder, an empty or truncated file, a file that is
            not a torch checkpoint (text, a plain pickle), or one whose pickle asks for a
            global that is not plain data (the weights-only unpickler never calls it).
    """
    allow_mmengine_checkpoints()
    checkpoint, reason = _load_reason(path)
    if reason:
        raise CheckpointError(reason, path)
    return checkpoint


def backbone_state(checkpoint: dict) -> Tuple[str, Dict[str, Tensor]]:
    """Find the layout of a loaded checkpoint and return (layout, backbone state dict).

    The classifier / projection MLP (`fc.*`) of the torchvision and authors' layouts is dropped:
    our backbones end at the pooled features.
    """
    state = checkpoint.get('state_dict', checkpoint) if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict) or not state:
        raise CheckpointMismatchError('checkpoint holds no state dict')
    for layout, prefix in LAYOUTS.items():
        if prefix and not any(k.startswith(prefix) for k in state):
            continue
        if not prefix and 'conv1.weight' not in state:
            continue
        picked = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        return layout, {k: v for k, v in picked.items() if not k.startswith('fc.')}
    raise CheckpointMismatchError(
        'unknown checkpoint layout: expected keys starting with backbone., module.encoder_q., '
        f'encoder_q. or a torchvision ResNet (conv1.weight); first keys: {list(state)[:3]}')


def check_fits(model: nn.Module, state: Dict[str, Tensor]) -> None:
    """Raise CheckpointMismatchError naming missing/unexpected counts and the first bad shape."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    bad_shape = next(((k, tuple(state[k].shape), tuple(v.shape)) for k, v in own.items()
                      if k in state and state[k].shape != v.shape), None)
    if missing or unexpected or bad_shape:
        first = (f'; first shape mismatch {bad_shape[0]}: checkpoint {bad_shape[1]} vs '
                 f'model {bad_shape[2]}') if bad_shape else ''
        raise CheckpointMismatchError(
            f'checkpoint does not fit the backbone: {len(missing)} missing keys '
            f'{missing[:2]}, {len(unexpected)} unexpected keys {unexpected[:2]}{first}; check '
            'the config (depth, small_stem) matches the checkpoint')


def load_backbone(model: nn.Module, path: str) -> str:
    """Load the backbone weights of `path` into `model` strictly; return the layout found."""
    try:
        layout, state = backbone_state(read_checkpoint(path))
        check_fits(model, state)
    except CheckpointMismatchError as err:
        raise CheckpointMismatchError(err.reason, path) from None
    model.load_state_dict(state, strict=True)
    return layout


def check_resume_fits(model: nn.Module, path: str) -> None:
    """Raise CheckpointMismatchError (one line, naming the file) unless the training checkpoint
    `path` holds every tensor of `model` in its shape: mmengine would load it non-strictly and
    fail at the optimizer, or train from a half-random model, once the data is built."""
    state = read_checkpoint(path).get('state_dict', {})
    try:
        check_fits(unwrap(model), state)
    except CheckpointMismatchError as err:
        raise CheckpointMismatchError(err.reason.replace('the backbone', 'the model'), path) from None


def checkpoint_meta(path: str) -> dict:
    """The meta block of one of our checkpoints ({} for other layouts), loaded weights-only."""
    ckpt = read_checkpoint(path)
    return ckpt.get('meta', {}) if isinstance(ckpt, dict) else {}


# -- resume: which checkpoint to continue from ----------------------------------------------

def checkpoint_candidates(work_dir: str) -> List[str]:
    """Checkpoints of ``work_dir``, newest first: the `last_checkpoint` pointer, then by time."""
    found = [p for p in glob.glob(osp.join(work_dir, '*.pth'))
             if not osp.basename(p).startswith('.')]
    found.sort(key=lambda p: (osp.getmtime(p), p), reverse=True)
    pointer = osp.join(work_dir, LAST_CHECKPOINT)
    if osp.isfile(pointer):
        with open(pointer) as handle:
            target = handle.read().strip()
        for path in (target, osp.join(work_dir, osp.basename(target))):
            if osp.isfile(path):
                found = [path] + [p for p in found if osp.abspath(p) != osp.abspath(path)]
                break
    return found


def loadable(path: str) -> Optional[str]:
    """None if ``path`` loads as a training checkpoint (weights only), else why not."""
    allow_mmengine_checkpoints()
    try:
        checkpoint, reason = _load_reason(path)
    except Exception as err:  # noqa: BLE001 - any failure means "not loadable"
        return f'{type(err).__name__}: {_first_line(err)}'
    if reason:
        return reason
    if not isinstance(checkpoint, dict) or 'state_dict' not in checkpoint or 'meta' not in checkpoint:
        return 'not a training checkpoint (no state_dict/meta)'
    return None


def choose_resume_checkpoint(work_dir: str) -> Tuple[Optional[str], List[str]]:
    """The newest loadable checkpoint of ``work_dir`` and one log line per decision.

    Returns:
        (path or None when there is none, messages to log).
    """
    messages = []
    for path in checkpoint_candidates(work_dir):
        reason = loadable(path)
        if reason is None:
            return path, messages + [f'resuming from {path}']
        messages.append(f'skipping unreadable checkpoint {path} ({reason[:200]}); '
                        'trying the next newest')
    return None, messages + [f'--resume: no loadable checkpoint in {work_dir}; '
                             'starting from scratch']
