"""A disk that fills up while one process saves a checkpoint, in-process through tools/train.py's
main (tests/harness/faults/in_process.py: the real tool path and hooks, an 8-channel backbone):
the checkpoint write writes a third of the file and then raises ENOSPC, as mmengine's file
backend would. The run ends with exit code 74 and one line on stderr, last, after the
visualizer (wandb) has closed; the last good checkpoint loads, nothing partial is left, and
`--resume` ends with the weights of the uninterrupted run bit for bit. Two real processes on a
real full file system: tests/e2e/test_full_disk_run.py."""
import errno
import os
import os.path as osp
import re
import sys

from mmengine.fileio.backends import local_backend
from mmengine.visualization import Visualizer

from benchmark.atomic_io import size_text
from benchmark.exit_codes import DISK_FULL_EXIT_CODE
from benchmark.engine.checkpoints import loadable
from benchmark.harness.faults import runs as fr
from tests.harness.faults.in_process import (  # noqa: F401  fixtures, two of them autouse
    PER_EPOCH, TOTAL, close_run_loggers, config, data, reference, resume, small_runs, weights)
from tools import train

# 3 iterations per epoch, iter_<n>.pth every 2: iter_2, epoch_1, then iter_4 does not fit.
LAST_GOOD, FAILING = 'epoch_1.pth', 'iter_4.pth'


def test_a_full_disk_ends_with_exit_74_and_the_line_last_then_resumes_bit_identical(
        tmp_path, data, reference, monkeypatch, capsys):
    put, close = local_backend.LocalBackend.put, Visualizer.close

    def full_disk(self, obj, filepath):
        if str(filepath).endswith(f'.{FAILING}.tmp'):
            with open(filepath, 'wb') as handle:
                handle.write(obj[:len(obj) // 3])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(filepath))
        return put(self, obj, filepath)

    def closing(self):  # where wandb prints its closing lines
        print('visualizer closed', file=sys.stderr, flush=True)
        close(self)
    monkeypatch.setattr(local_backend.LocalBackend, 'put', full_disk)
    monkeypatch.setattr(Visualizer, 'close', closing)
    work = str(tmp_path / 'run')
    capsys.readouterr()
    assert train.main([config(str(tmp_path), data), '--work-dir', work, '--no-eval']) == \
        DISK_FULL_EXIT_CODE == 74
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    good = osp.join(work, LAST_GOOD)
    assert re.fullmatch(
        rf'error: no space left on device writing checkpoint to {re.escape(work)} \(needs about '
        rf'{re.escape(size_text(os.path.getsize(good)))}, [\d.]+ k?[MG]?B free\); the last good '
        rf'checkpoint is {LAST_GOOD}; free space and rerun with --resume', lines[-1]), lines[-5:]
    assert 'visualizer closed' in lines[:-1] and 'Traceback' not in err
    assert not [p for p in os.listdir(work) if p.endswith('.tmp')]
    assert not osp.exists(osp.join(work, FAILING))
    assert loadable(good) is None and fr.referenced_corrupt(work) == []

    monkeypatch.setattr(local_backend.LocalBackend, 'put', put)  # space freed
    assert resume(tmp_path, data, work) == TOTAL - PER_EPOCH
    assert fr.differing(reference(), weights(work)) == []
