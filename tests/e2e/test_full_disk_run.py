"""End to end: a disk that fills up while a real run saves a checkpoint, with two gloo processes
through tools/dist_train.sh. Rank 0 finds the disk full and rank 1 learns it at the save: both
stop (no wait for a collective timeout), and dist_train.sh exits 74 with, as the last line of
stderr (after torchrun's report), one line naming the folder, the space needed and the last
good checkpoint; wandb (offline) has closed before it. That checkpoint loads whole and no
partial file is left. The disk is a real tmpfs of one and a half checkpoints of the tiny MixCo
(the shared uninterrupted run's, tests/e2e/conftest.py) where this machine lets the test mount
one (root): one checkpoint fits, two do not; elsewhere the checkpoint write writes a third of
the file and then raises ENOSPC, as mmengine's file backend would on a full disk.

One process (tools/train.py's own exit 74 and line, wandb closing before it, the resume
bit-identical) runs in-process in tests/harness/faults/test_full_disk_in_process.py; the line
and the undone write unit by unit in tests/engine/test_full_disk.py."""
import os
import re
import subprocess

import pytest

from benchmark.atomic_io import size_text
from benchmark.engine.checkpoints import loadable
from benchmark.harness.faults import runs as fr
from tests.e2e.conftest import HAS_WANDB, run_env, tiny_config

# Imported by the run's config: with FAIL_WRITE_OF set, writing that checkpoint writes a part of
# it and then finds the disk full, as mmengine's file backend would.
ENOSPC = """
import errno, os
from mmengine.fileio.backends import local_backend

_put = local_backend.LocalBackend.put


def put(self, obj, filepath):
    if os.environ.get('FAIL_WRITE_OF') and str(filepath).endswith(f".{os.environ['FAIL_WRITE_OF']}.tmp"):
        with open(filepath, 'wb') as handle:
            handle.write(obj[:len(obj) // 3])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(filepath))
    return _put(self, obj, filepath)


local_backend.LocalBackend.put = put
"""
# Two processes: 4 iterations per epoch; iter_3.pth is the first checkpoint, epoch_1.pth (after
# iteration 4) the one that does not fit.
LAST_GOOD, FAILING = 'iter_3.pth', 'epoch_1.pth'


def _line(work: str, needed: int, last_good: str) -> re.Pattern:
    return re.compile(rf'error: no space left on device writing checkpoint to {re.escape(work)} '
                      rf'\(needs about {re.escape(size_text(needed))}, [\d.]+ k?[MG]?B free\); '
                      rf'the last good checkpoint is {re.escape(last_good)}; free space and '
                      r'rerun with --resume')


@pytest.fixture
def disk(tmp_path, reference_2p):
    """(folder for the work dir, the environment's fault setting): a tmpfs of one and a half
    checkpoints of the run (the reference's, the same config), or, where this machine does not
    let the test mount one, a plain folder with the checkpoint write that fails."""
    mount = tmp_path / 'disk'
    mount.mkdir()
    size_kb = os.path.getsize(reference_2p.checkpoint) * 3 // 2 // 1024
    made = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size_kb}k', 'tmpfs', str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        yield mount, {'FAIL_WRITE_OF': FAILING}
        return
    try:
        yield mount, {}
    finally:
        subprocess.run(['umount', '-l', str(mount)], check=False)


def test_two_processes_end_together_with_the_line_last(disk, tiny_data, tmp_path):
    mount, fault = disk
    (tmp_path / 'enospc.py').write_text(ENOSPC)
    config = tiny_config(tmp_path / 'tiny.py', tiny_data, imports=['enospc'])
    env = run_env(tmp_path, tmp_path)
    env.pop('FAIL_WRITE_OF', None)
    work = str(mount / 'work')
    full = fr.train(config, work, nproc=2, env=dict(env, WANDB_MODE='offline', **fault),
                    timeout=900)
    lines = [line for line in full.stderr.splitlines() if line.strip()]
    assert full.returncode == 74, full.stderr[-3000:]
    assert 'wandb: Run summary:' in full.stderr or not HAS_WANDB  # closed before the line
    good = os.path.join(work, LAST_GOOD)
    assert _line(work, os.path.getsize(good), LAST_GOOD).fullmatch(lines[-1]), lines[-5:]
    assert not [p for p in os.listdir(work) if p.endswith('.tmp')]
    assert loadable(good) is None and fr.referenced_corrupt(work) == []
    assert not os.path.exists(os.path.join(work, FAILING))

