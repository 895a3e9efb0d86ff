"""Load a pretrained backbone from the checkpoint layouts researchers have, strictly.

Layouts: this suite's mmengine checkpoints (`state_dict` with `backbone.*`), the MixCo / MoCo
authors' checkpoints (`state_dict` with `module.encoder_q.*`, the MLP head under `fc.*`), and
plain torchvision ResNet state dicts (`conv1.weight`, ..., `fc.*`). Loading goes through
torch's weights-only unpickler: a checkpoint is never allowed to run code.
"""
from typing import Dict, Tuple

import torch
from torch import Tensor, nn

from benchmark.compat import allow_mmengine_checkpoints

LAYOUTS = {  # layout name -> prefix of the backbone keys
    'mixco-bench': 'backbone.',
    'moco-authors': 'module.encoder_q.',
    'moco-authors-single-gpu': 'encoder_q.',
    'torchvision': '',
}


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the backbone it is loaded into."""


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
    allow_mmengine_checkpoints()
    checkpoint = torch.load(path, map_location='cpu', weights_only=True)
    layout, state = backbone_state(checkpoint)
    check_fits(model, state)
    model.load_state_dict(state, strict=True)
    return layout


def checkpoint_meta(path: str) -> dict:
    """The meta block of one of our checkpoints ({} for other layouts), loaded weights-only."""
    allow_mmengine_checkpoints()
    ckpt = torch.load(path, map_location='cpu', weights_only=True)
    return ckpt.get('meta', {}) if isinstance(ckpt, dict) else {}
