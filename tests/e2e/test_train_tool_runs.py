"""tools/train.py end to end on the tiny fake data: torch.compile traced through mmengine's
train_step (in-process), and a whole run (a real process) online against a failing wandb server
finishing offline with its record."""
import json

import torch

from tests.conftest import needs_wandb
from tests.engine.test_wandb_fallback import WARNING
from tools import train as train_tool

TINY = ['train_dataloader.batch_size=8', 'train_dataloader.dataset.input_size=32',
        'train_cfg.max_epochs=1', 'model.queue_size=64', 'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False']


def test_compile_smoke_on_cpu(tmp_path, fake_tiny, run_main, tiny_backbones):
    """compile=dict(backend='eager'): dynamo traces mmengine's train_step of MoCo (3 steps), its
    encoders the tests' one-convolution stand-in (what is traced is the step, not ResNet-18's
    layers: tracing those took 16 s of CPU)."""
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


@needs_wandb
def test_train_completes_offline_when_the_server_fails(reference_1p):
    """Online mode with a key and a failing server: exit 0, a record, an offline wandb run,
    one warning. The run is the shared one-process run of tests/e2e/conftest.py
    (`reference_1p`), which meets the server that accepts connections and never answers (the
    one that would cost most without the probe). (That the backend goes offline without an
    online attempt, hence without wandb's own timeouts, and every kind of failing server (its
    SERVERS) within the probe's bound, are pinned in-process in
    tests/engine/test_wandb_fallback.py.)"""
    proc, work_dir = reference_1p.proc, reference_1p.work
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = list((reference_1p.results / 'runs').glob('*.json'))
    assert len(records) == 1 and json.loads(records[0].read_text())['method'] == 'mixco'
    assert proc.stderr.count(WARNING) == 1 and 'is in use' not in proc.stderr
    run_id = (work_dir / 'wandb_run_id').read_text().strip()
    runs = list(work_dir.glob(f'**/wandb/offline-run-*-{run_id}'))
    assert len(runs) == 1 and list(runs[0].glob('files/media/table/eval/*.table.json'))
