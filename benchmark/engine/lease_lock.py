"""Locks where `flock` does not hold across machines: which mounts those are, and a lease.

`flock` is released by the kernel when its holder dies, but on several shared file systems it
is local to each machine or missing: Lustre mounted without ``flock`` (``noflock`` fails with
ENOSYS, ``localflock`` locks per client), NFS mounted ``nolock`` or ``local_lock=flock|all``,
BeeGFS (global locks are off by default and a mount does not say), SMB and FUSE mounts. A
work dir there is seen by every node of a cluster, and a lock that holds only on one node lets
two nodes train in it. `flock_is_coherent` reads the mount of a path (/proc/self/mountinfo) and
says whether its flock holds across nodes; unknown file systems count as not.

Where it does not, the lock is a lease: a file created with O_EXCL (atomic on NFS v3+, Lustre
and BeeGFS) holding its holder's line (pid, host, time, written and fsynced before the lock is
used), renewed by a heartbeat thread (its mtime every `LEASE_S` / 4 s). A holder that dies
stops renewing; after `LEASE_S` + `SKEW_S` (clocks of nodes and file server differ) its lease
has expired and the next taker moves it aside. A dead holder on the same host is seen at once.
"""
from __future__ import annotations

import json
import os
import os.path as osp
import secrets
import socket
import sys
import threading
import time
from typing import List, Optional, Tuple

from benchmark.engine.lock_holder import Holder, read_holder

LEASE_S = 60.0  # a lease not renewed for this long (plus SKEW_S) has expired
SKEW_S = 30.0  # allowed clock difference between this node and the file server
# File systems whose flock holds on every client, unless a mount option says otherwise.
COHERENT = {'nfs', 'nfs4', 'gpfs', 'ceph', 'ocfs2', 'gfs2'}
# Local file systems: one machine sees them, flock holds.
LOCAL = {'ext2', 'ext3', 'ext4', 'xfs', 'btrfs', 'tmpfs', 'overlay', 'zfs', 'f2fs', 'ramfs',
         'reiserfs', 'jfs', 'vfat', 'exfat', 'ntfs', 'ntfs3', 'hfsplus', 'bcachefs'}


def _unescape(text: str) -> str:
    """A mountinfo field (spaces and the like written as octal escapes)."""
    return text.encode().decode('unicode_escape') if '\\' in text else text


def mount_of(path: str, mountinfo: Optional[str] = None) -> Tuple[str, str, List[str]]:
    """(mount point, file system type, mount and super options) of the mount holding `path`."""
    if mountinfo is None:
        try:
            with open('/proc/self/mountinfo', encoding='utf-8') as handle:
                mountinfo = handle.read()
        except OSError:
            return '/', 'unknown', []
    target = osp.realpath(path)
    best = ('/', 'unknown', [])
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(' - ')
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(rest) < 3:
            continue
        point = _unescape(fields[4])
        inside = target == point or target.startswith(point.rstrip('/') + '/')
        if inside and len(point) >= len(best[0]):  # the last of equal ones is on top
            best = (point, rest[0], fields[5].split(',') + rest[2].split(','))
    return best


def flock_is_coherent(path: str, mountinfo: Optional[str] = None) -> bool:
    """Whether a flock on `path` holds against processes on every machine that sees it."""
    _, fstype, options = mount_of(path, mountinfo)
    if fstype in LOCAL:
        return True
    if fstype == 'lustre':
        return 'flock' in options  # localflock: per client; noflock (default): ENOSYS
    if fstype in ('nfs', 'nfs4'):
        return not ({'nolock', 'local_lock=flock', 'local_lock=all'} & set(options))
    return fstype in COHERENT


class LeaseLock:
    """An exclusive lease on `path` (see the module), with `FileLock`'s methods."""

    def __init__(self, path: str, lease_s: float = LEASE_S) -> None:
        self.path, self.lease_s = path, lease_s
        self.token = secrets.token_hex(8)
        self._stop: Optional[threading.Event] = None

    @property
    def held(self) -> bool:
        return self._stop is not None

    def try_acquire(self, note: bool = True) -> bool:  # noqa: ARG002 - a lease always notes
        """Take the lease if nobody holds it (an expired one is moved aside); True if taken."""
        if self.held:
            return True
        os.makedirs(osp.dirname(osp.abspath(self.path)), exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                if not self._break_expired():
                    return False
                continue
            line = json.dumps(dict(pid=os.getpid(), host=socket.gethostname(),
                                   since=time.strftime('%Y-%m-%d %H:%M:%S %Z'),
                                   token=self.token, lease_s=self.lease_s))
            try:
                os.write(fd, (line + '\n').encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            self._stop = threading.Event()
            threading.Thread(target=self._renew, args=(self._stop,), daemon=True,
                             name='lease-heartbeat').start()
            return True
        return False

    def _renew(self, stop: threading.Event) -> None:
        while not stop.wait(self.lease_s / 4):
            if not self._ours():
                print(f'warning: {self.path}: this process lost its lease (another took it '
                      'after it expired)', file=sys.stderr)
                return
            try:
                os.utime(self.path)
            except OSError:
                pass

    def _ours(self) -> bool:
        try:
            with open(self.path, encoding='utf-8') as handle:
                return json.loads(handle.read() or '{}').get('token') == self.token
        except (OSError, ValueError, AttributeError):
            return False

    def expired(self) -> bool:
        """The lease file exists but its holder is gone: not renewed for its lease plus the
        clock allowance, or its pid is dead on this host."""
        try:
            age = time.time() - os.stat(self.path).st_mtime
        except FileNotFoundError:
            return False
        return age > self.lease_s + SKEW_S or read_holder(self.path).alive_here() is False

    def stale(self) -> bool:
        """The lease exists and has not been renewed for two heartbeats: its holder may be
        gone (it expires soon) or slow."""
        try:
            return time.time() - os.stat(self.path).st_mtime > self.lease_s / 2
        except FileNotFoundError:
            return False

    def _break_expired(self) -> bool:
        """Move an expired lease aside; True if the path is free to try again."""
        if not self.expired():
            return False
        aside = f'{self.path}.expired.{socket.gethostname()}.{os.getpid()}'
        try:
            os.rename(self.path, aside)
            os.unlink(aside)
        except FileNotFoundError:
            pass  # another taker moved it first
        return True

    def release(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._stop = None
            if self._ours():
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass

    def holder(self) -> Holder:
        return read_holder(self.path)

    def probe(self) -> Optional[Holder]:
        """None if nobody holds the lease now (none, or expired), else the holder."""
        if self.held or not osp.exists(self.path) or self.expired():
            return None
        return self.holder()
