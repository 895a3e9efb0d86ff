"""Pick the checkpoint `--resume` continues from: the newest one that loads."""
import glob
import os.path as osp
from typing import List, Optional, Tuple

import torch


def checkpoint_candidates(work_dir: str) -> List[str]:
    """Checkpoints of ``work_dir``, newest first: the `last_checkpoint` pointer, then by time."""
    found = [p for p in glob.glob(osp.join(work_dir, '*.pth'))
             if not osp.basename(p).startswith('.')]
    found.sort(key=lambda p: (osp.getmtime(p), p), reverse=True)
    pointer = osp.join(work_dir, 'last_checkpoint')
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
    from .compat import allow_mmengine_checkpoints
    allow_mmengine_checkpoints()
    try:
        checkpoint = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as err:  # noqa: BLE001 - any failure means "not loadable"
        return f'{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ""}'
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
