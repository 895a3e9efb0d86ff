"""The code a SLURM array runs: a copy of the checkout's code and configs, made at submission.

An array's tasks start over hours or days, and are requeued; each would otherwise import the
live checkout, so a `git pull` or an edit during the array changes what later tasks (or a
requeued one) train. At submission the launcher copies `benchmark/`, `methods/`, `tools/` and
`configs/` to ``<work root>/suites/<suite>/submitit/code/<hash>/`` with `SOURCE.json` (the
checkout's git state: commit, dirty, diff hash), and the tasks' commands and PYTHONPATH point
there. The same code and git state give the same folder (reused, not copied again). The records of
runs trained from a snapshot carry its `SOURCE.json` git state (`benchmark.reports.provenance`).
Configs outside the checkout are read where they are.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import List, Optional

from benchmark.atomic_io import atomic_write_text
from benchmark.layout import REPO_ROOT, SNAPSHOT_SOURCE_FILE

SNAPSHOT_DIRS = ('benchmark', 'methods', 'tools', 'configs')
SNAPSHOT_FILES = ('results/paper_results.csv',)
SNAPSHOT_DIR = 'code'  # in the suite's submitit folder


def _files(root: Path) -> List[Path]:
    """The files a snapshot holds, relative to `root`, sorted."""
    found = [Path(name) for name in SNAPSHOT_FILES if (root / name).is_file()]
    for top in SNAPSHOT_DIRS:
        for path in (root / top).rglob('*'):
            if path.is_file() and '__pycache__' not in path.parts and path.suffix != '.pyc':
                found.append(path.relative_to(root))
    return sorted(found)


def snapshot_name(root: Path = REPO_ROOT, git: Optional[dict] = None) -> str:
    """A hash of the files a snapshot of `root` would hold (names and bytes) and of the git
    state it notes (`git`, default the checkout's): its folder's name."""
    from benchmark.reports.provenance import git_state
    digest = hashlib.sha256(json.dumps(git_state() if git is None else git,
                                       sort_keys=True).encode())
    for name in _files(root):
        digest.update(str(name).encode() + b'\0' + (root / name).read_bytes() + b'\0')
    return digest.hexdigest()[:16]


def snapshot_code(parent: Path, root: Path = REPO_ROOT) -> Path:
    """The snapshot of `root`'s code under `parent` (made once per content and git state:
    written to a temporary folder and renamed, so a snapshot folder is always complete)."""
    from benchmark.reports.provenance import git_state
    git = git_state()
    dest = parent / snapshot_name(root, git)
    if (dest / SNAPSHOT_SOURCE_FILE).is_file():
        return dest
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f'.{dest.name}.{os.getpid()}'
    shutil.rmtree(staging, ignore_errors=True)
    for name in _files(root):
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, staging / name)
    atomic_write_text(str(staging / SNAPSHOT_SOURCE_FILE), json.dumps(
        dict(git=git, source=str(root)), indent=1) + '\n')
    try:
        os.rename(staging, dest)
    except OSError:  # another launch made it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
        if not (dest / SNAPSHOT_SOURCE_FILE).is_file():
            raise
    return dest


def in_snapshot(cmd: List[str], snapshot: Path, root: Path = REPO_ROOT) -> List[str]:
    """`cmd` with the paths into the checkout's code and configs pointing into `snapshot`."""
    out = []
    for arg in cmd:
        path = Path(arg)
        if path.is_absolute():
            try:
                relative = path.relative_to(root)
            except ValueError:
                relative = None
            if relative is not None and relative.parts and (
                    relative.parts[0] in SNAPSHOT_DIRS or str(relative) in SNAPSHOT_FILES):
                arg = str(snapshot / relative)
        out.append(arg)
    return out
