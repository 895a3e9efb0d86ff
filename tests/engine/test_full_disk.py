"""A checkpoint that does not fit on the disk: the write is undone, the run's last good
checkpoint is left as it was, and the run ends with one line naming the folder, the space the
checkpoint needs and the last good checkpoint (`DiskFullError`, exit code 74). A run that hits
it: tests/harness/faults/test_full_disk_in_process.py (one process, in-process) and
tests/e2e/test_full_disk_run.py (two real processes)."""
import errno
import os
import re
from types import SimpleNamespace

import pytest
import torch
from mmengine.logging import MessageHub
from torch import nn

from benchmark.engine.checkpoint_hook import (DiskFullError,
                                              SafeCheckpointHook, checkpoint_bytes,
                                              full_disk_line, full_disk_message)
from benchmark.exit_codes import DISK_FULL_EXIT_CODE
from benchmark.layout import LAST_CHECKPOINT

LINE = re.compile(r'no space left on device writing checkpoint to (\S+) \(needs about (.+), '
                  r'(\S+ \S*B) free\); (.+); free space and rerun with --resume')


def _runner(work_dir, save):
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()  # momentum buffers: part of a checkpoint
    return SimpleNamespace(hooks=[], model=model, optim_wrapper=SimpleNamespace(optimizer=optimizer),
                           work_dir=str(work_dir), save_checkpoint=save,
                           message_hub=MessageHub.get_instance('full-disk-test'), iter=5)


def test_the_line_names_the_folder_the_space_and_the_last_good_checkpoint(tmp_path):
    (tmp_path / 'iter_400.pth').write_bytes(b'x' * 3_000_000)
    (tmp_path / 'epoch_1.pth').write_bytes(b'x')
    (tmp_path / LAST_CHECKPOINT).write_text(str(tmp_path / 'iter_400.pth'))
    found = LINE.fullmatch(full_disk_message(str(tmp_path), 45_000_000, str(tmp_path)))
    assert found.group(1, 2, 4) == (str(tmp_path), '45 MB',
                                    'the last good checkpoint is iter_400.pth')
    empty = tmp_path / 'empty'
    empty.mkdir()
    assert LINE.fullmatch(full_disk_message(str(empty), None, str(empty))).group(2, 4) == \
        ('an unknown amount', 'no checkpoint was written before')
    assert DISK_FULL_EXIT_CODE == 74


def test_another_file_on_a_full_disk_is_one_line_too(tmp_path):
    line = full_disk_line(OSError(errno.ENOSPC, 'No space left on device',
                                  str(tmp_path / 'results' / 'x.json')))
    assert re.fullmatch(rf'no space left on device writing {tmp_path}/results/x.json \(\S+ \S*B '
                        r'free\); free space and rerun with --resume', line), line
    assert full_disk_line(DiskFullError('the checkpoint line')) == 'the checkpoint line'


def test_the_space_a_checkpoint_needs_is_the_last_ones_or_the_tensors(tmp_path):
    runner = _runner(tmp_path, None)
    weights = sum(p.numel() * 4 for p in runner.model.parameters())
    assert checkpoint_bytes(runner) == 2 * weights  # weights and momentum, before any save
    (tmp_path / 'iter_3.pth').write_bytes(b'x' * 12345)
    assert checkpoint_bytes(runner) == 12345


def test_a_save_on_a_full_disk_undoes_its_file_and_keeps_the_last_good_one(tmp_path):
    good = tmp_path / 'iter_3.pth'
    good.write_bytes(b'the good one')
    (tmp_path / LAST_CHECKPOINT).write_text(str(good))

    def save(out_dir, filename, *args, **kwargs):  # mmengine's save, on a disk that fills up
        with open(os.path.join(out_dir, filename), 'wb') as handle:
            handle.write(b'half')
        raise OSError(errno.ENOSPC, 'No space left on device', os.path.join(out_dir, filename))
    hook = SafeCheckpointHook(interval=1, iter_interval=3)
    hook.out_dir = str(tmp_path)
    with pytest.raises(DiskFullError) as full:
        hook._write(_runner(tmp_path, save), 'iter_6.pth', by_epoch=False)
    found = LINE.fullmatch(str(full.value))
    assert found and found.group(2, 4) == ('12 B', 'the last good checkpoint is iter_3.pth')
    assert full.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == ['iter_3.pth', LAST_CHECKPOINT]
    assert good.read_bytes() == b'the good one'
    assert (tmp_path / LAST_CHECKPOINT).read_text() == str(good)


def test_other_write_errors_are_not_taken_for_a_full_disk(tmp_path):
    def save(out_dir, filename, *args, **kwargs):
        raise PermissionError(errno.EACCES, 'Permission denied', filename)
    hook = SafeCheckpointHook(interval=1)
    hook.out_dir = str(tmp_path)
    with pytest.raises(PermissionError):
        hook._write(_runner(tmp_path, save), 'iter_6.pth', by_epoch=False)
