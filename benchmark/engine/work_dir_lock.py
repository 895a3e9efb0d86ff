"""One trainer per work dir: an exclusive lock that dies with its holder.

A training job holds ``<work dir>/trainer.lock`` (rank 0 holds it for the whole job) from before
it reads any data until it exits, evaluation included. A second trainer on the same work dir
refuses in one line, naming the holder, and exits with `WORK_DIR_BUSY_EXIT_CODE`.

The lock is `fcntl.flock` on the file: the kernel releases it when the holding process ends,
however it ends (SIGKILL included), so a dead trainer never blocks its work dir and there is
nothing to clean up. A flock belongs to the open file, which a forked child (a loader worker)
would share and keep locked after its trainer ended: every child forked while this process
holds locks closes its copies first thing (`os.register_at_fork`), which leaves the parent's
lock held; exec'd children never get them (O_CLOEXEC). The file holds the holder's pid, host and start time, for the message; it
is never deleted (a process that deleted it while another waited on it would let a third lock a
new file of the same name). `Lock` is the lock a caller takes: flock where the file system's
flock holds across machines, else a lease (`benchmark.engine.lease_lock`); it is used for other
files too (a suite's run claims).

Within one process, taking the lock of a work dir it already holds is a no-op: a tool called
twice in one process (its tests) trains, then resumes, in one work dir.

A resume may start the moment a stopped trainer's exit status is known, while something of
that job still holds the lock (the trainers of a job whose launcher was killed save their
checkpoint before they exit): ``wait_s`` makes it wait that long for the holder to go, saying
so, before it refuses.
"""
from __future__ import annotations

import atexit
import errno
import fcntl
import json
import os
import os.path as osp
import socket
import sys
import time
import weakref
from typing import Callable, Dict, Optional

from benchmark import dist
from benchmark.engine.lease_lock import LeaseLock, flock_is_coherent
from benchmark.engine.lock_holder import Holder, read_holder  # noqa: F401  (re-exported)

TRAINER_LOCK = 'trainer.lock'  # in the work dir: held by the job training there
# A file system without flock (some network mounts) raises one of these: a lease instead.
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class LocksUnsupported(OSError):
    """The file system of a lock file does not support flock."""


_OPEN: 'weakref.WeakSet[FileLock]' = weakref.WeakSet()  # flocks this process holds


def _close_in_child() -> None:
    """In a child just forked: close its copies of the parent's flock descriptors. The lock
    stays the parent's (its own descriptor keeps the open file); the child, a loader worker
    that may outlive its trainer by seconds, no longer keeps it."""
    for lock in list(_OPEN):
        fd, lock.fd = lock.fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
    _OPEN.clear()


os.register_at_fork(after_in_child=_close_in_child)


class FileLock:
    """An exclusive, non-blocking flock on ``path``, with the holder written into the file.

    Args:
        path: The lock file (created if missing, never deleted).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self.fd is not None

    def try_acquire(self, note: bool = True) -> bool:
        """Take the lock if nobody holds it; True if taken. ``note``: write this process as
        the holder (a probe that releases at once does not).

        Raises:
            LocksUnsupported: The file system has no flock.
        """
        if self.fd is not None:
            return True
        os.makedirs(osp.dirname(osp.abspath(self.path)), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as err:
            os.close(fd)
            if err.errno in NO_LOCKS:
                raise LocksUnsupported(err.errno, f'no file locks on this file system ({err.strerror})',
                                       self.path) from None
            raise
        self.fd = fd
        _OPEN.add(self)
        if note:
            text = json.dumps(dict(pid=os.getpid(), host=socket.gethostname(),
                                   since=time.strftime('%Y-%m-%d %H:%M:%S %Z')))
            os.ftruncate(fd, 0)
            os.pwrite(fd, (text + '\n').encode(), 0)
        return True

    def release(self) -> None:
        """Give the lock up (closing the file releases it)."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            _OPEN.discard(self)
            os.close(fd)

    def holder(self) -> Holder:
        """The holder the file names. A holder that has just taken the lock may not have
        written itself yet: a file naming a process that no longer runs here is read again for
        up to a second, as is an empty one."""
        for _ in range(10):
            found = read_holder(self.path)
            if found.pid is not None and found.alive_here() is not False:
                return found
            time.sleep(0.1)
        return Holder()

    def probe(self) -> Optional[Holder]:
        """None if nobody holds the lock now (taken and given back at once), else the holder."""
        if self.held:
            return None
        if not osp.exists(self.path):
            return None
        if self.try_acquire(note=False):
            self.release()
            return None
        return self.holder()


LEASE_SUFFIX = '.lease'  # beside the flock file: the lease where flock does not hold


class Lock:
    """The lock of `path` that holds where its file lives: `FileLock` (flock) where the mount's
    flock holds across machines, else a `LeaseLock` on ``<path>.lease``; a flock the file
    system refuses (ENOSYS, ENOLCK, ...) turns into the lease too. Never granted unlocked."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.impl = (FileLock(path) if flock_is_coherent(osp.dirname(osp.abspath(path)))
                     else LeaseLock(path + LEASE_SUFFIX))

    @property
    def held(self) -> bool:
        return self.impl.held

    def _call(self, name: str, *args):
        try:
            return getattr(self.impl, name)(*args)
        except LocksUnsupported:
            self.impl = LeaseLock(self.path + LEASE_SUFFIX)
            return getattr(self.impl, name)(*args)

    def try_acquire(self, note: bool = True) -> bool:
        return self._call('try_acquire', note)

    def release(self) -> None:
        self.impl.release()

    def holder(self) -> Holder:
        return self.impl.holder()

    def probe(self) -> Optional[Holder]:
        return self._call('probe')


class WorkDirBusy(RuntimeError):
    """Another live trainer holds the work dir (one line, naming it)."""

    def __init__(self, work_dir: str, holder: Holder) -> None:
        self.work_dir, self.holder = work_dir, holder
        super().__init__(f'work dir {work_dir} is being trained by {holder.describe()}; wait for '
                         'it or pick another --work-dir')


_HELD: Dict[str, Lock] = {}  # work dir -> this process's lock of it


def lock_path(work_dir: str) -> str:
    """<work dir>/trainer.lock."""
    return osp.join(work_dir, TRAINER_LOCK)


RESUME_WAIT_S = 120.0  # how long a resume waits for a stopped job's holder to go


def _wait_free(work_dir: str, holder: Holder, wait_s: float, free: Callable[[], bool],
               say: Callable[[str], None]) -> bool:
    """Poll ``free`` for up to ``wait_s`` seconds, saying first who is waited for; True once it
    is (saying after how long), False if the time ran out."""
    say(f'work dir {work_dir} is still held by {holder.describe()}; waiting up to '
        f'{wait_s:.0f} s for it to end')
    start = time.monotonic()
    while time.monotonic() - start < wait_s:
        time.sleep(0.2)
        if free():
            say(f'work dir {work_dir} is free after {time.monotonic() - start:.1f} s')
            return True
    return False


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def hold_work_dir(work_dir: str, wait_s: float = 0.0,
                  say: Callable[[str], None] = _say) -> Optional[Lock]:
    """On rank 0: take the work dir's trainer lock for this process's lifetime (None on other
    ranks). A lease whose holder has stopped renewing it (a node that failed; the job is being
    requeued) is waited for until it expires, rather than refused; a live holder, for up to
    ``wait_s`` seconds (a resume right after a stop: see the module's docstring).

    Raises:
        WorkDirBusy: Another live process holds it (after ``wait_s``).
    """
    if not dist.is_main():
        return None
    key = osp.realpath(work_dir)
    if key in _HELD:
        return _HELD[key]
    lock = Lock(lock_path(work_dir))
    taken = lock.try_acquire()
    while not taken and isinstance(lock.impl, LeaseLock) and lock.impl.stale():
        time.sleep(lock.impl.lease_s / 8)
        taken = lock.try_acquire()
    if not taken and wait_s > 0:
        taken = _wait_free(work_dir, lock.holder(), wait_s, lock.try_acquire, say)
    if not taken:
        raise WorkDirBusy(work_dir, lock.holder())
    _HELD[key] = lock
    atexit.register(lock.release)  # a lease is removed at exit (flock: the kernel releases it)
    return lock


def release_work_dir(work_dir: str) -> None:
    """Give up this process's trainer lock of ``work_dir`` (exiting gives it up too)."""
    lock = _HELD.pop(osp.realpath(work_dir), None)
    if lock is not None:
        lock.release()


def check_work_dir_free(work_dir: str, wait_s: float = 0.0,
                        say: Callable[[str], None] = _say) -> None:
    """Raise WorkDirBusy if another process trains in ``work_dir`` now, having waited up to
    ``wait_s`` seconds for it to go (nothing is created).

    Raises:
        WorkDirBusy: Another live process holds its trainer lock.
    """
    if osp.realpath(work_dir) in _HELD:
        return
    lock = Lock(lock_path(work_dir))
    holder = lock.probe()
    if holder is not None and wait_s > 0:
        if _wait_free(work_dir, holder, wait_s, lambda: lock.probe() is None, say):
            return
        holder = lock.holder()
    if holder is not None:
        raise WorkDirBusy(work_dir, holder)
