"""Provenance of a result: package versions, the checkout's git state, the host and device."""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from benchmark.layout import REPO_ROOT as ROOT
from benchmark.layout import SNAPSHOT_SOURCE_FILE

# Distribution names to try for each reported package (faiss and mmengine ship under several).
PACKAGES = {'python': (), 'torch': ('torch',), 'torchvision': ('torchvision',),
            'mmengine': ('mmengine', 'mmengine-lite'), 'lightly': ('lightly',),
            'faiss': ('faiss-cpu', 'faiss-gpu-cu12', 'faiss-gpu', 'faiss'),
            'sklearn': ('scikit-learn',), 'numpy': ('numpy',)}

def package_versions() -> Dict[str, Optional[str]]:
    """Versions of python and the packages results depend on; None where not installed."""
    versions: Dict[str, Optional[str]] = {'python': platform.python_version()}
    for key, dists in PACKAGES.items():
        for dist in dists:
            try:
                versions[key] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                versions[key] = None
    return versions


def _git(*args: str) -> Optional[bytes]:
    """Output of a read-only git command in the repository root, or None if git fails."""
    try:  # --no-optional-locks: concurrent writers must not fight over .git/index.lock
        proc = subprocess.run(['git', '--no-optional-locks', *args], cwd=ROOT,
                              capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_state() -> Dict[str, Any]:
    """``{'commit', 'dirty', 'diff_sha256'}`` of the checkout; None values outside git. Code
    running from a snapshot (`benchmark.suites.snapshot`) reports the checkout it was copied from.

    ``diff_sha256`` hashes ``git diff HEAD`` and the untracked (not ignored) files, so two runs
    with the same commit and hash ran the same code.
    """
    snapshot = ROOT / SNAPSHOT_SOURCE_FILE  # code copied for a SLURM array: its checkout's
    if snapshot.is_file():
        return dict(json.loads(snapshot.read_text())['git'])
    commit = _git('rev-parse', 'HEAD')
    status = _git('status', '--porcelain')
    diff = _git('diff', 'HEAD', '--binary')
    untracked = _git('ls-files', '-z', '--others', '--exclude-standard')
    if None in (commit, status, diff, untracked):
        return {'commit': None, 'dirty': None, 'diff_sha256': None}
    digest = hashlib.sha256(diff)
    for name in sorted(filter(None, untracked.split(b'\0'))):  # new files are part of the state
        digest.update(b'\0' + name + b'\0')
        try:
            digest.update((ROOT / os.fsdecode(name)).read_bytes())
        except OSError:
            pass
    return {'commit': commit.decode().strip(), 'dirty': bool(status.strip()),
            'diff_sha256': digest.hexdigest()}


def cpu_model(cpuinfo: Optional[str] = None) -> str:
    """The processor's model name (Linux: /proc/cpuinfo), else what ``platform`` knows. A name
    without a model number (a hypervisor's 'AMD EPYC', 'Intel(R) Xeon(R) Processor') gets the
    family, model and widest vector unit, which tell such machines apart:
    'AMD EPYC (family 26, model 2, AVX-512)'."""
    try:
        text = Path('/proc/cpuinfo').read_text(errors='replace') if cpuinfo is None else cpuinfo
    except OSError:
        text = ''
    fields: Dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(':')
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    name = fields.get('model name')
    if not name:
        return platform.processor() or platform.machine()
    if any(ch.isdigit() for ch in name) or 'cpu family' not in fields:
        return name
    flags = fields.get('flags', '').split()
    vector = 'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'no AVX2'
    return f"{name} (family {fields['cpu family']}, model {fields.get('model', '?')}, {vector})"


def host_info() -> Dict[str, Any]:
    """The machine's name, the device evaluations ran on (``cuda:<name>`` or ``cpu``), its CPU
    model, the vector kernels torch dispatches to on it (``cpu_kernels``: 'AVX512', 'AVX2',
    ...; ATEN_CPU_CAPABILITY can lower them, and they decide the order of floating-point
    operations), the number of CPU cores this process may use (its affinity: a suite running
    several runs at once gives each a share) and the machine's number of cores."""
    device = 'cpu'
    torch = sys.modules.get('torch')
    if torch is None:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is not None and torch.cuda.is_available():
        device = f'cuda:{torch.cuda.get_device_name(torch.cuda.current_device())}'
    cores = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    kernels = torch.backends.cpu.get_cpu_capability() if torch is not None else None
    return {'node': platform.node(), 'device': device, 'cpu': cpu_model(), 'cpu_kernels': kernels,
            'cpu_cores': cores, 'machine_cores': os.cpu_count()}
