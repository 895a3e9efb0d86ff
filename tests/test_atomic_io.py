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


def test_a_full_disk_or_quota_is_told_apart_and_sizes_read_as_people_write_them(tmp_path):
    import errno

    from benchmark.atomic_io import free_bytes, no_space_left, size_text
    assert no_space_left(OSError(errno.ENOSPC, 'No space left on device'))
    assert no_space_left(OSError(errno.EDQUOT, 'Disk quota exceeded'))
    assert not no_space_left(OSError(errno.EACCES, 'Permission denied'))
    assert not no_space_left(RuntimeError('no space'))
    assert [size_text(n) for n in (None, 999, 1500, 3.2e6, 45e6, 1.23e9)] == \
        ['an unknown amount', '999 B', '1.5 kB', '3.2 MB', '45 MB', '1.2 GB']
    assert free_bytes(str(tmp_path / 'not' / 'yet')) > 0  # its nearest existing folder's


@pytest.mark.parametrize('links', [True, False])
def test_create_new_writes_once_and_never_replaces_with_or_without_hard_links(
        tmp_path, monkeypatch, links):
    from benchmark.atomic_io import create_new
    if not links:  # a file system without hard links: the exclusive create instead
        def no_link(src, dst):
            raise OSError(1, 'Operation not permitted')
        monkeypatch.setattr(os, 'link', no_link)
    path = tmp_path / 'run.json'
    assert create_new(str(path), b'first') == str(path)
    assert path.read_bytes() == b'first'
    with pytest.raises(FileExistsError):
        create_new(str(path), b'second')
    assert path.read_bytes() == b'first'
    assert os.listdir(tmp_path) == ['run.json']  # no temporary file left
