"""Locks where flock does not hold across machines: the mount table decides (faked here, in
/proc/self/mountinfo's format), and the lease stands in: one holder at a time, its holder line
durable, renewed while its holder lives, taken over once it has expired or its holder died."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from benchmark.engine import lease_lock
from benchmark.engine.lease_lock import LeaseLock, flock_is_coherent, mount_of
from benchmark.engine.lock_holder import read_holder
from benchmark.engine.work_dir_lock import Lock

MOUNTS = """\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw
30 22 0:40 / /scratch rw,relatime shared:9 - lustre 10.0.0.1@tcp:/fs rw,localflock,lazystatfs
31 22 0:41 / /lustre rw,relatime - lustre 10.0.0.1@tcp:/fs2 rw,flock
32 22 0:42 / /lustre/noflock rw,relatime - lustre 10.0.0.1@tcp:/fs3 rw
40 22 0:50 / /users rw,relatime - nfs4 server:/users rw,vers=4.2,local_lock=none
41 22 0:51 / /data rw,relatime - nfs server:/data rw,vers=3,nolock
42 22 0:52 / /nfsflock rw,relatime - nfs4 server:/x rw,local_lock=flock
50 22 0:60 / /beegfs rw,relatime - beegfs beegfs_nodev rw,cfgFile=/etc/beegfs/beegfs-client.conf
51 22 0:61 / /gpfs rw,relatime - gpfs gpfs0 rw
60 22 0:70 / /my\\040work rw - fuse.sshfs host:/w rw,user_id=0
61 22 0:71 / /ramdisk rw - tmpfs tmpfs rw
"""


@pytest.mark.parametrize('path, fstype, coherent', [
    ('/srv/x', 'ext4', True), ('/ramdisk/a', 'tmpfs', True),
    ('/scratch/run', 'lustre', False),  # localflock: each client locks for itself
    ('/lustre/run', 'lustre', True),  # flock: coherent
    ('/lustre/noflock/run', 'lustre', False),  # the inner mount, without flock
    ('/users/u/run', 'nfs4', True), ('/data/run', 'nfs', False), ('/nfsflock/r', 'nfs4', False),
    ('/beegfs/run', 'beegfs', False), ('/gpfs/run', 'gpfs', True),
    ('/my work/run', 'fuse.sshfs', False)])
def test_the_mount_says_whether_flock_holds_across_machines(path, fstype, coherent):
    assert mount_of(path, MOUNTS)[1] == fstype
    assert flock_is_coherent(path, MOUNTS) is coherent


def test_unknown_file_systems_get_a_lease():
    assert not flock_is_coherent('/x', '1 0 0:1 / / rw - weirdfs none rw\n')


def test_a_lock_on_a_mount_without_coherent_flock_is_a_lease(tmp_path, monkeypatch):
    monkeypatch.setattr('benchmark.engine.work_dir_lock.flock_is_coherent', lambda path: False)
    first, second = Lock(str(tmp_path / 'l')), Lock(str(tmp_path / 'l'))
    assert isinstance(first.impl, LeaseLock)
    assert first.try_acquire() and not second.try_acquire()
    line = json.loads((tmp_path / 'l.lease').read_text())
    assert (line['pid'], line['host']) == (os.getpid(), socket.gethostname())
    assert second.probe().pid == os.getpid()
    first.release()
    assert second.probe() is None and second.try_acquire()
    second.release()


def test_the_lease_is_renewed_while_its_holder_lives(tmp_path):
    lease = LeaseLock(str(tmp_path / 'l'), lease_s=0.4)
    assert lease.try_acquire()
    try:
        old = time.time() - 100
        os.utime(tmp_path / 'l', (old, old))
        end = time.monotonic() + 5
        while os.stat(tmp_path / 'l').st_mtime < old + 50 and time.monotonic() < end:
            time.sleep(0.02)
        assert os.stat(tmp_path / 'l').st_mtime > old + 50  # the heartbeat touched it
    finally:
        lease.release()


def test_a_dead_holders_lease_blocks_nothing(tmp_path, monkeypatch):
    """A holder killed on this host: taken at once. On another host (its node failed): taken
    once it has not been renewed for the lease plus the clock allowance, not before."""
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          capture_output=True, text=True).stdout.strip()
    path = tmp_path / 'l'
    path.write_text(json.dumps(dict(pid=int(dead), host=socket.gethostname(), since='x',
                                    token='t')) + '\n')
    lease = LeaseLock(str(path))
    assert lease.probe() is None and lease.try_acquire()
    lease.release()
    path.write_text(json.dumps(dict(pid=7, host='node-that-failed', since='x')) + '\n')
    fresh = LeaseLock(str(path), lease_s=60)
    assert fresh.probe().host == 'node-that-failed' and not fresh.try_acquire()
    old = time.time() - 60 - lease_lock.SKEW_S - 1  # its last renewal, past the lease
    os.utime(path, (old, old))
    assert fresh.stale() and fresh.probe() is None and fresh.try_acquire()
    assert json.loads(path.read_text())['pid'] == os.getpid()
    fresh.release()
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_a_requeued_trainer_waits_for_a_failed_nodes_lease(tmp_path, monkeypatch):
    """hold_work_dir with a lease its holder stopped renewing: it waits for the expiry
    instead of refusing (exit 75), then holds the work dir."""
    from benchmark.engine import work_dir_lock as wl
    monkeypatch.setattr(wl, 'flock_is_coherent', lambda path: False)
    monkeypatch.setattr(lease_lock, 'LEASE_S', 0.8)
    monkeypatch.setattr(lease_lock, 'SKEW_S', 0.0)
    monkeypatch.setattr(LeaseLock.__init__, '__defaults__', (0.8,))
    path = tmp_path / 'trainer.lock.lease'
    path.write_text(json.dumps(dict(pid=7, host='node-that-failed', since='x')) + '\n')
    old = time.time() - 0.5  # stale (no renewal for more than half the lease), not expired
    os.utime(path, (old, old))
    lock = wl.hold_work_dir(str(tmp_path))
    try:
        assert isinstance(lock.impl, LeaseLock)
        assert json.loads(path.read_text())['pid'] == os.getpid()
    finally:
        wl.release_work_dir(str(tmp_path))


def test_the_holder_line_of_a_lease_reads_like_a_flock_files(tmp_path):
    lease = LeaseLock(str(tmp_path / 'l'))
    assert lease.try_acquire()
    try:
        found = read_holder(str(tmp_path / 'l'))
        assert (found.pid, found.host) == (os.getpid(), socket.gethostname())
        assert found.describe().startswith(f'pid {os.getpid()} on host ')
    finally:
        lease.release()


def test_a_trainer_leaving_normally_removes_its_lease(tmp_path, subprocess_env):
    code = ('import sys; from benchmark.engine import work_dir_lock as wl; '
            'wl.flock_is_coherent = lambda path: False; wl.hold_work_dir(sys.argv[1]); '
            'import os; print(os.path.exists(sys.argv[1] + "/trainer.lock.lease"))')
    out = subprocess.run([sys.executable, '-c', code, str(tmp_path)], env=subprocess_env,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == 'True', out.stderr
    assert not (tmp_path / 'trainer.lock.lease').exists()
