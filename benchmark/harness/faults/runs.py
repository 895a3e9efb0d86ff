"""Running the real tools for the fault campaign: tiny configs, subprocess runs, comparisons.

Shared by `benchmark.harness.faults.campaign` (the cases) and the tests.
"""
from __future__ import annotations

import dataclasses
import glob
import os
import os.path as osp
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from benchmark.layout import REPO_ROOT, import_path

BASE_HOOKS = ("dict(type='RunInfoHook'), dict(type='KNNMonitorHook', interval=10), "
              "dict(type='NaNGuardHook'), dict(type='PreemptionHook')")
# The suite's types, plus the campaign's fault hooks (never part of a real run).
IMPORTS = ['methods', 'benchmark.components', 'benchmark.harness.faults.hooks']


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def tiny_env(home: Optional[str] = None) -> Dict[str, str]:
    """Environment of a campaign subprocess: one thread, wandb off, the checkout importable."""
    env = dict(os.environ, PYTHONPATH=import_path(), OMP_NUM_THREADS='1', PYTHONWARNINGS='ignore',
               WANDB_MODE='disabled')
    env.pop('WANDB_API_KEY', None)
    if home:
        env['HOME'] = home
    return env


def write_config(path: str, method: str, data_root: str, *, epochs: int = 2, batch: int = 4,
                 iter_interval: int = 3, max_keep_ckpts: int = 3, fault: str = '',
                 workers: int = 2, extra: str = '', dataset: str = '', width: float = 1) -> str:
    """A tiny config over ``configs/<method>_r18_tiny.py`` with an optional fault hook.

    Args:
        path: Where to write it.
        method: 'mocov2', 'mixco', 'simclr', 'mixco_simclr'.
        data_root: A Tiny-ImageNet-format folder (e.g. from `benchmark.data.fakes`).
        fault: A hook of `benchmark.harness.faults.hooks`, e.g. ``"dict(type='KillHook', at_iter=5)"``.
        extra: More config lines.
        dataset: More keyword arguments of the dataset, e.g. ``"bad_data='skip'"``.
        width: The ResNet's channels times this (1: the config's own network; 0.25 keeps its
            layers with a sixteenth of the weights, for runs that test the pipeline).
    """
    base = REPO_ROOT / 'configs' / f'{method}_r18_tiny.py'
    hooks = BASE_HOOKS + (f', {fault}' if fault else '')
    model = ([] if 'simclr' in method else ['queue_size=16']) + (
        [f'backbone=dict(width={width!r})'] if width != 1 else [])
    model_line = f"model = dict({', '.join(model)})\n" if model else ''
    text = (f"_base_ = [{str(base)!r}]\n"
            f"custom_imports = dict(imports={IMPORTS!r}, allow_failed_imports=False)\n"
            f"train_dataloader = dict(batch_size={batch}, num_workers={workers}, "
            f"persistent_workers={workers > 0}, "
            f"dataset=dict(data_root={data_root!r}, input_size=32{', ' + dataset if dataset else ''}))\n"
            f"train_cfg = dict(max_epochs={epochs})\n{model_line}"
            f"default_hooks = dict(logger=dict(interval=1), checkpoint=dict("
            f"iter_interval={iter_interval}, max_keep_ckpts={max_keep_ckpts}))\n"
            f"custom_hooks = [{hooks}]\n{extra}")
    Path(path).write_text(text)
    return path


def train(config: str, work_dir: str, *, nproc: int = 1, resume: bool = False,
          no_eval: bool = True, extra: Sequence[str] = (), timeout: float = 600,
          env: Optional[dict] = None, torchrun: bool = False) -> subprocess.CompletedProcess:
    """Run `tools/train.py` (one process) or `tools/dist_train.sh` (several, or one with
    ``torchrun``: a distributed process group, NCCL on a GPU) to the end."""
    args = ['--work-dir', work_dir, *(['--resume'] if resume else []),
            *(['--no-eval'] if no_eval else ['--results-dir', osp.join(work_dir, 'results')]),
            *extra]
    env = dict(env or tiny_env(work_dir))
    if nproc == 1 and not torchrun:
        cmd = [sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), config, *args]
    else:
        env.update(PYTHON=sys.executable)  # no PORT: torchrun's standalone rendezvous
        cmd = ['bash', str(REPO_ROOT / 'tools' / 'dist_train.sh'), config, str(nproc), *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def load_weights(path: str) -> Dict[str, torch.Tensor]:
    """The model state of a checkpoint, loaded weights-only."""
    from benchmark.engine.compat import allow_mmengine_checkpoints
    allow_mmengine_checkpoints()
    return torch.load(path, map_location='cpu', weights_only=True)['state_dict']


def final_checkpoint(work_dir: str, epochs: int) -> str:
    return osp.join(work_dir, f'epoch_{epochs}.pth')


def differing(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> List[str]:
    """Names whose tensors are not `torch.equal` (or missing on one side)."""
    names = sorted(set(a) | set(b))
    return [n for n in names if n not in a or n not in b or not torch.equal(a[n], b[n])]


def remove_checkpoints(folder: str) -> None:
    """Delete the checkpoints (and half-written temporary ones) under ``folder``."""
    for path in glob.glob(osp.join(folder, '**', '*.pth'), recursive=True) + \
            glob.glob(osp.join(folder, '**', '.*.tmp'), recursive=True):
        os.remove(path)


def referenced_corrupt(work_dir: str) -> List[str]:
    """Checkpoints that `last_checkpoint` or the file names reference but that do not load."""
    from benchmark.engine.checkpoints import loadable
    bad = []
    pointer = osp.join(work_dir, 'last_checkpoint')
    files = set(glob.glob(osp.join(work_dir, '*.pth')))
    if osp.isfile(pointer):
        target = Path(pointer).read_text().strip()
        if not osp.isfile(target):
            bad.append(f'{target} (last_checkpoint points to a missing file)')
        files.add(target)
    for path in sorted(f for f in files if osp.isfile(f)):
        if loadable(path) is not None:
            bad.append(path)
    return bad


@dataclasses.dataclass
class Scorecard:
    """Counts of the campaign; ``failures`` says what went wrong, one line each."""
    faults_injected: int = 0
    faults_survived: int = 0
    checkpoints_corrupt: int = 0
    bad_inputs_tried: int = 0
    bad_inputs_rejected: int = 0
    rows_lost: int = 0
    failures: List[str] = dataclasses.field(default_factory=list)

    def fault(self, survived: bool, what: str) -> None:
        self.faults_injected += 1
        self.faults_survived += int(survived)
        if not survived:
            self.failures.append(what)

    def bad_input(self, rejected: bool, what: str) -> None:
        self.bad_inputs_tried += 1
        self.bad_inputs_rejected += int(rejected)
        if not rejected:
            self.failures.append(what)

    def lines(self) -> List[str]:
        return [f'faults injected / survived:     {self.faults_injected} / {self.faults_survived}',
                f'checkpoints corrupt:            {self.checkpoints_corrupt}',
                f'bad inputs tried / rejected:    {self.bad_inputs_tried} / '
                f'{self.bad_inputs_rejected}',
                f'result rows lost:               {self.rows_lost}']
