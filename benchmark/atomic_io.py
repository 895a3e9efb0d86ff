"""Crash-safe file writes: a reader sees the old file or the complete new one, never a part."""
import os
import os.path as osp
import tempfile
from typing import Callable


def fsync_dir(folder: str) -> None:
    """Persist a rename in ``folder`` (POSIX; a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, write: Callable[[str], None]) -> str:
    """Write ``path`` through a temporary file in the same folder, flushed, fsynced, renamed.

    Args:
        path: The final file.
        write: Called with the temporary path; writes the whole content there.

    Returns:
        ``path``.
    """
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(path)}.', suffix='.tmp', dir=folder)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, 'rb+') as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise
    fsync_dir(folder)
    return path


def atomic_write_text(path: str, text: str) -> str:
    """`atomic_write` of a text file."""
    def write(tmp: str) -> None:
        with open(tmp, 'w') as handle:
            handle.write(text)
    return atomic_write(path, write)
