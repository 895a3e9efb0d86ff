"""Crash-safe writes: the old file or the complete new one, and never-overwrite creates."""
import os

import pytest

from benchmark.atomic_io import atomic_write, atomic_write_text


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / 'last_checkpoint'
    atomic_write_text(str(path), 'old')

    def broken(tmp):
        with open(tmp, 'w') as handle:
            handle.write('half')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(str(path), broken)
    assert path.read_text() == 'old'
    assert os.listdir(tmp_path) == ['last_checkpoint']  # no temporary file left
