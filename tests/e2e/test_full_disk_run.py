"""End to end: a disk that fills up while a real run saves a checkpoint. tools/train.py (one
process) and tools/dist_train.sh (two gloo processes) end with exit code 74 and, as the last
line of stderr, one line naming the folder, the space needed and the last good checkpoint; that
checkpoint loads, no partial file is left, and once there is space `--resume` finishes, with
the weights of an uninterrupted run bit for bit. The full disk is a checkpoint write that
raises ENOSPC after writing a part of the file; where this machine lets the test mount a small
tmpfs (root), a real full file system too."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.atomic_io import size_text
from benchmark.data.fakes import make_fake_tiny_imagenet
from benchmark.engine.checkpoints import loadable
from benchmark.harness.faults import runs as fr
from tests.conftest import needs_wandb

EPOCHS = 2  # iteration checkpoints every 3 iterations: iter_3 is written, iter_6 is not
# (8 steps per epoch with one process, 4 with two)
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


def _line(work: str, needed: int, last_good: str) -> re.Pattern:
    return re.compile(rf'error: no space left on device writing checkpoint to {re.escape(work)} '
                      rf'\(needs about {re.escape(size_text(needed))}, [\d.]+ k?[MG]?B free\); '
                      rf'the last good checkpoint is {re.escape(last_good)}; free space and '
                      r'rerun with --resume')


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    """(folder with the config and the patch, config, environment without the fault)."""
    folder = tmp_path_factory.mktemp('full-disk')
    data = make_fake_tiny_imagenet(folder / 'data', num_classes=2, train_per_class=16,
                                   val_per_class=2, size=32)
    (folder / 'enospc.py').write_text(ENOSPC)
    config = fr.write_config(str(folder / 'tiny.py'), 'mixco', str(data), epochs=EPOCHS,
                             workers=0, iter_interval=3,
                             extra=f'custom_imports = dict(imports={fr.IMPORTS + ["enospc"]!r}, '
                                   'allow_failed_imports=False)\n')
    env = fr.tiny_env(str(folder))
    env['PYTHONPATH'] = os.pathsep.join([env['PYTHONPATH'], str(folder)])
    env.pop('FAIL_WRITE_OF', None)
    return folder, config, env


@pytest.fixture(scope='module')
def reference(setup):
    """The final weights of an uninterrupted one-process run."""
    folder, config, env = setup
    work = str(folder / 'reference')
    done = fr.train(config, work, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return fr.load_weights(fr.final_checkpoint(work, EPOCHS))


def _check_full_disk_end(proc: subprocess.CompletedProcess, work: str, last_good: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 74, proc.stderr[-3000:]
    good = os.path.join(work, last_good)
    assert _line(work, os.path.getsize(good), last_good).fullmatch(lines[-1]), lines[-5:]
    assert not [p for p in os.listdir(work) if p.endswith('.tmp')]
    assert loadable(good) is None
    assert fr.referenced_corrupt(work) == []


@needs_wandb
def test_one_process_ends_with_one_line_and_resumes(setup, reference, tmp_path):
    """With wandb logging (offline): its closing lines come before the run's last line."""
    folder, config, env = setup
    work = str(tmp_path / 'work')
    full = fr.train(config, work, env=dict(env, FAIL_WRITE_OF='iter_6.pth', WANDB_MODE='offline'),
                    timeout=900)
    _check_full_disk_end(full, work, 'iter_3.pth')
    assert 'Traceback' not in full.stderr and 'wandb: Run summary:' in full.stderr
    resumed = fr.train(config, work, resume=True, env=env, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert 'resuming from' in resumed.stderr and 'iter_3.pth' in resumed.stderr
    assert fr.differing(reference, fr.load_weights(fr.final_checkpoint(work, EPOCHS))) == []


def test_two_processes_end_together_with_the_line_last(setup, tmp_path):
    """Rank 0 finds the disk full, rank 1 learns it at the save: both stop (no wait for a
    collective timeout), and dist_train.sh exits 74 with the line after torchrun's report."""
    folder, config, env = setup
    work = str(tmp_path / 'work')
    full = fr.train(config, work, nproc=2, env=dict(env, FAIL_WRITE_OF='iter_6.pth'),
                    timeout=900)
    _check_full_disk_end(full, work, 'epoch_1.pth')  # 4 steps per epoch: after iter_3.pth
    resumed = fr.train(config, work, nproc=2, resume=True, env=env, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert os.path.isfile(fr.final_checkpoint(work, EPOCHS))


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 200 MB tmpfs (one checkpoint of the tiny MixCo fits, two do not), or a skip where this
    machine does not let the test mount one."""
    mount = tmp_path / 'disk'
    mount.mkdir()
    made = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=200m', 'tmpfs', str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f'cannot mount a tmpfs here: {made.stderr.strip()[:200]}')
    try:
        yield mount
    finally:
        subprocess.run(['umount', '-l', str(mount)], check=False)


def test_a_real_full_file_system(setup, reference, small_tmpfs):
    folder, config, env = setup
    work = str(small_tmpfs / 'work')
    full = fr.train(config, work, env=dict(env, HOME=str(folder)), timeout=900)
    _check_full_disk_end(full, work, 'iter_3.pth')
    subprocess.run(['mount', '-o', 'remount,size=1g', str(small_tmpfs)], check=True)  # space freed
    resumed = fr.train(config, work, resume=True, env=dict(env, HOME=str(folder)), timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert fr.differing(reference, fr.load_weights(fr.final_checkpoint(work, EPOCHS))) == []
    Path(fr.final_checkpoint(work, EPOCHS)).unlink()
