"""tools/train.py end to end on the tiny fake data: torch.compile traced through mmengine's
train_step (in-process), and whole runs (real processes) online against a failing wandb server
finishing offline with their record."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchmark.layout import import_path
from tests.conftest import ROOT, needs_wandb
from tests.engine.test_wandb_fallback import KEY, WARNING, wandb_server
from tools import train as train_tool

TINY = ['train_dataloader.batch_size=8', 'train_dataloader.dataset.input_size=32',
        'train_cfg.max_epochs=1', 'model.queue_size=64', 'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False']


def test_compile_smoke_on_cpu(tmp_path, fake_tiny, run_main):
    """compile=dict(backend='eager'): dynamo traces mmengine's train_step of MoCo (3 steps)."""
    try:
        code, out, err, _ = run_main(
            train_tool, 'configs/mocov2_r18_tiny.py', '--work-dir', tmp_path, '--no-eval',
            '--cfg-options', f'train_dataloader.dataset.data_root={fake_tiny}', *TINY,
            'train_dataloader.num_batch_per_epoch=3', 'compile.backend=eager', 'custom_hooks=[]',
            'default_hooks.logger.interval=1')
    finally:
        torch._dynamo.reset()
    assert code == 0, err[-3000:]
    log = out + err
    assert 'Model has been "compiled"' in log and 'Epoch(train) [1][3/3]' in log


def train_env() -> dict:
    """The e2e tests' subprocess environment (tests/conftest.py), without wandb settings."""
    env = dict(os.environ, PYTHONPATH=import_path(), OMP_NUM_THREADS='1', PYTHONWARNINGS='ignore')
    for name in ('WANDB_API_KEY', 'WANDB_MODE', 'WANDB_BASE_URL'):
        env.pop(name, None)
    return env


def train_process(tmp_path: Path, fake_tiny: str, env: dict, name: str) -> tuple:
    """tools/train.py on the tiny fake data; (seconds, process, work dir, results dir)."""
    work_dir, results = tmp_path / name, tmp_path / f'results_{name}'
    cmd = [sys.executable, 'tools/train.py', 'configs/mocov2_r18_tiny.py', '--work-dir',
           str(work_dir), '--results-dir', str(results), '--cfg-options',
           f'train_dataloader.dataset.data_root={fake_tiny}', *TINY]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return time.monotonic() - start, proc, work_dir, results


@needs_wandb
@pytest.mark.parametrize('kind', ['silent'])
def test_train_completes_offline_when_the_server_fails(kind, tmp_path, fake_tiny):
    """Online mode with a key and a failing server: exit 0, a record, an offline wandb run,
    one warning. (That the backend goes offline without an online attempt, hence without
    wandb's own timeouts, is pinned in-process in tests/engine/test_wandb_fallback.py.)

    The whole run meets the server that accepts connections and never answers (the one that
    would cost most without the probe); every kind of failing server (its SERVERS) is met by the
    backend itself, in-process, within the probe's bound in tests/engine/test_wandb_fallback.py."""
    with wandb_server(kind) as url:
        env = dict(train_env(), WANDB_MODE='online', WANDB_API_KEY=KEY, WANDB_BASE_URL=url,
                   HOME=str(tmp_path))
        _, proc, work_dir, results = train_process(tmp_path, fake_tiny, env, kind)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = list((results / 'runs').glob('*.json'))
    assert len(records) == 1 and json.loads(records[0].read_text())['method'] == 'mocov2'
    assert proc.stderr.count(WARNING) == 1 and 'is in use' not in proc.stderr
    run_id = (work_dir / 'wandb_run_id').read_text().strip()
    runs = list(work_dir.glob(f'**/wandb/offline-run-*-{run_id}'))
    assert len(runs) == 1 and list(runs[0].glob('files/media/table/eval/*.table.json'))
