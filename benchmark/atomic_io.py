"""Crash-safe file writes: a reader sees the old file or the complete new one, never a part;
and what a write that found the disk full says about it."""
import errno
import os
import os.path as osp
import shutil
import tempfile
from typing import Callable, Optional

# A full disk, or a full quota: both need space freed, and then the same command again.
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_WRITING = set()  # temporary files of the writes in flight (`abandon_writes`)


def no_space_left(err: BaseException) -> bool:
    """Whether ``err`` is an OSError saying the disk (or the quota) is full."""
    return isinstance(err, OSError) and err.errno in NO_SPACE_ERRNOS


def free_bytes(path: str) -> Optional[int]:
    """Bytes free for writing on the file system of ``path`` (its nearest existing folder)."""
    path = osp.abspath(path)
    while not osp.exists(path) and osp.dirname(path) != path:
        path = osp.dirname(path)
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def size_text(n: Optional[float]) -> str:
    """'45 MB', '1.2 GB', '800 kB' ('an unknown amount' for None)."""
    if n is None:
        return 'an unknown amount'
    for unit, scale in (('GB', 1e9), ('MB', 1e6), ('kB', 1e3)):
        if n >= scale:
            return f'{n / scale:.1f} {unit}' if n < 10 * scale else f'{n / scale:.0f} {unit}'
    return f'{int(n)} B'


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
    _WRITING.add(tmp)
    try:
        write(tmp)
        with open(tmp, 'rb+') as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise
    finally:
        _WRITING.discard(tmp)
    fsync_dir(folder)
    return path


def abandon_writes() -> None:
    """Remove the temporary files of the writes in flight, for an exit that skips their
    cleanup (``os._exit``): each final file stays as it was."""
    for tmp in list(_WRITING):
        try:
            os.remove(tmp)
        except OSError:
            pass


def atomic_write_text(path: str, text: str) -> str:
    """`atomic_write` of a text file."""
    def write(tmp: str) -> None:
        with open(tmp, 'w', encoding='utf-8') as handle:
            handle.write(text)
    return atomic_write(path, write)


def write_synced(fd: int, data: bytes) -> None:
    """Write ``data`` to the open file descriptor ``fd``, flush and fsync it, and close it."""
    with os.fdopen(fd, 'wb') as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def create_new(path: str, data: bytes) -> str:
    """Create ``path`` holding ``data``, complete or not at all, never replacing a file.

    The data goes to a temporary file in the same folder (flushed, fsynced), which is then
    hard-linked to ``path``: atomic, and it fails if ``path`` exists. Where the file system has
    no hard links, ``path`` is created with ``O_EXCL`` and written: still never an overwrite,
    but a reader may briefly see it incomplete.

    Raises:
        FileExistsError: ``path`` exists already (it is left unchanged).
    """
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(path)}.', suffix='.tmp', dir=folder)
    try:
        write_synced(fd, data)
        try:
            os.link(tmp, path)  # atomic, and fails if path exists: never overwrites
        except FileExistsError:
            raise
        except OSError:  # no hard links on this file system: exclusive create instead
            write_synced(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), data)
    finally:
        os.unlink(tmp)
    fsync_dir(folder)
    return path
