"""One trainer per work dir: the lock held by another process refuses a second trainer in one
line naming it (pid, host, since), tools/train.py and tools/dist_train.sh exit 75 with that line
before reading any data, and a holder killed with SIGKILL blocks nothing; nor does a forked
child that outlives its trainer, and a resume waits a bounded time for a holder to go."""
import errno
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchmark.engine import work_dir_lock as wl
from benchmark.engine.lease_lock import LeaseLock
from benchmark.exit_codes import WORK_DIR_BUSY_EXIT_CODE
from benchmark.engine.work_dir_lock import (TRAINER_LOCK, FileLock, Holder,
                                            WorkDirBusy, check_work_dir_free, hold_work_dir,
                                            read_holder, release_work_dir)
from tests.conftest import ROOT

HOLD = ('import sys; from benchmark.engine.work_dir_lock import hold_work_dir; '
        'hold_work_dir(sys.argv[1]); print("held", flush=True); sys.stdin.read()')
BUSY = re.compile(r'work dir (\S+) is being trained by pid (\d+) on host (\S+) since '
                  r'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S*); wait for it or pick another --work-dir')


@pytest.fixture
def holder(subprocess_env):
    """holder(work_dir) -> a live process of its own holding the work dir's trainer lock."""
    procs = []

    def start(work_dir) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, '-c', HOLD, str(work_dir)], env=subprocess_env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == 'held'
        return proc
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture(autouse=True)
def rank_0(monkeypatch):
    monkeypatch.delenv('RANK', raising=False)
    monkeypatch.delenv('SLURM_PROCID', raising=False)


def test_a_work_dir_held_by_another_process_is_refused_naming_it(tmp_path, holder):
    proc = holder(tmp_path)
    with pytest.raises(WorkDirBusy) as busy:
        hold_work_dir(str(tmp_path))
    found = BUSY.fullmatch(str(busy.value))
    assert found, str(busy.value)
    assert found.groups()[:3] == (str(tmp_path), str(proc.pid), socket.gethostname())
    with pytest.raises(WorkDirBusy):
        check_work_dir_free(str(tmp_path))  # the probe of `train.py --check-only`
    assert read_holder(str(tmp_path / TRAINER_LOCK)).pid == proc.pid  # the probe wrote nothing


def test_a_sigkilled_holder_blocks_nothing(tmp_path, holder):
    proc = holder(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    check_work_dir_free(str(tmp_path))
    lock = hold_work_dir(str(tmp_path))  # the stale file is simply taken over
    try:
        assert lock.held and read_holder(lock.path).pid == os.getpid()
        assert (tmp_path / TRAINER_LOCK).is_file()
    finally:
        release_work_dir(str(tmp_path))


def test_the_holding_process_may_take_it_again_and_gives_it_up(tmp_path, subprocess_env):
    """A tool run twice in one process (train, then --resume) trains in its own work dir;
    once given up, another process takes it."""
    first = hold_work_dir(str(tmp_path))
    try:
        assert hold_work_dir(str(tmp_path / '.')) is first
        check_work_dir_free(str(tmp_path))
    finally:
        release_work_dir(str(tmp_path))
    assert not first.held
    proc = subprocess.run([sys.executable, '-c', HOLD, str(tmp_path)], env=subprocess_env,
                          input='', capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == 'held', proc.stderr


def test_only_rank_0_takes_it(tmp_path, monkeypatch):
    monkeypatch.setenv('RANK', '1')
    assert hold_work_dir(str(tmp_path / 'w')) is None
    assert not (tmp_path / 'w').exists()


def test_a_file_system_without_flock_gets_a_lease_never_no_lock(tmp_path, monkeypatch):
    """flock failing with ENOSYS (Lustre mounted noflock): the trainer holds a lease instead,
    and a second trainer is refused as with flock."""
    def no_locks(fd, operation):
        raise OSError(errno.ENOSYS, 'Function not implemented')
    monkeypatch.setattr(wl.fcntl, 'flock', no_locks)
    lock = hold_work_dir(str(tmp_path))
    try:
        assert isinstance(lock.impl, LeaseLock) and (tmp_path / 'trainer.lock.lease').is_file()
        with pytest.raises(WorkDirBusy, match=r'is being trained by pid \d+ on host'):
            check_work_dir_free_elsewhere(str(tmp_path))
    finally:
        release_work_dir(str(tmp_path))
    assert not (tmp_path / 'trainer.lock.lease').exists()


def check_work_dir_free_elsewhere(work_dir):
    """check_work_dir_free as another process would call it (not this one's held lock)."""
    held = dict(wl._HELD)
    wl._HELD.clear()
    try:
        check_work_dir_free(work_dir)
    finally:
        wl._HELD.update(held)


def test_an_unreadable_or_stale_holder_reads_as_another_process(tmp_path, monkeypatch):
    path = tmp_path / TRAINER_LOCK
    path.write_text('not json')
    assert read_holder(str(path)) == Holder()
    assert Holder().describe() == 'another process'
    monkeypatch.setattr(wl.time, 'sleep', lambda s: None)
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          capture_output=True, text=True).stdout.strip()
    path.write_text(f'{{"pid": {dead}, "host": "{socket.gethostname()}", "since": "x"}}\n')
    assert FileLock(str(path)).holder() == Holder()  # names a process that is gone
    path.write_text('{"pid": 7, "host": "elsewhere", "since": "x"}\n')
    assert FileLock(str(path)).holder().describe() == 'pid 7 on host elsewhere since x'


# -- the tools ------------------------------------------------------------------------------

def test_train_refuses_a_held_work_dir_in_one_line_before_reading_data(tmp_path, holder, run_main,
                                                                       monkeypatch):
    """Also under torchrun, where dist_train.sh's own check came first and this process lost
    the race: the code reaches tools/dist_train.sh (torchrun would end the job with 1)."""
    from tools import train
    monkeypatch.setenv('TRAIN_EXIT_CODE_FILE', str(tmp_path / 'exit_code'))
    monkeypatch.setattr(train, 'RESUME_WAIT_S', 0.0)  # a resume waits for the holder at first
    proc = holder(tmp_path / 'w')
    code, out, err, _ = run_main(train, 'configs/mixco_r18_tiny.py', '--work-dir', tmp_path / 'w',
                                 '--resume', '--cfg-options',
                                 f'train_dataloader.dataset.data_root={tmp_path / "nowhere"}')
    assert code == WORK_DIR_BUSY_EXIT_CODE == 75
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: ')
    found = BUSY.fullmatch(lines[0][len('error: '):])
    assert found and found.group(2) == str(proc.pid), lines
    assert sorted(p.name for p in (tmp_path / 'w').iterdir()) == [TRAINER_LOCK]
    assert (tmp_path / 'exit_code').read_text() == f'75\n{lines[0]}\n'


@pytest.mark.parametrize('node_rank, code', [('0', 75), ('1', 0)])
def test_on_several_machines_only_node_0_probes_the_lock(tmp_path, holder, run_main, monkeypatch,
                                                       node_rank, code):
    """A manual launch on several machines (dist_train.sh with NNODES, NODE_RANK): node 0's
    trainer holds the work dir while the other nodes check their config, so only node 0's
    check probes the lock."""
    from tools import train
    holder(tmp_path / 'w')
    monkeypatch.setenv('NODE_RANK', node_rank)
    monkeypatch.setenv('WORLD_SIZE', '2')
    found, _, err, _ = run_main(train, 'configs/mixco_r18_tiny.py', '--check-only',
                                '--work-dir', tmp_path / 'w')
    assert found == code, err


@pytest.mark.slow
def test_dist_train_says_it_once_before_starting_torchrun(tmp_path, holder, subprocess_env):
    proc = holder(tmp_path / 'w')
    env = dict(subprocess_env, PYTHON=sys.executable)
    run = subprocess.run(['bash', str(ROOT / 'tools' / 'dist_train.sh'), 'configs/mixco_r18_tiny.py',
                          '2', '--work-dir', str(tmp_path / 'w')], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 75, run.stderr[-2000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and BUSY.fullmatch(lines[0][len('error: '):]), lines
    assert f'pid {proc.pid} ' in lines[0]
    assert not list(Path(tmp_path / 'w').glob('*/*.log'))  # nothing started


FORKED = """
import multiprocessing, os, sys, time
from benchmark.engine.work_dir_lock import hold_work_dir, lock_path
hold_work_dir(sys.argv[1])
def child(path, answer):
    fds = []
    for fd in os.listdir('/proc/self/fd'):
        try:
            fds.append(os.readlink(f'/proc/self/fd/{fd}'))
        except OSError:  # the listing's own descriptor, closed by now
            pass
    answer.send(os.path.realpath(path) in fds)
    time.sleep(60)
ctx = multiprocessing.get_context('fork')
ours, theirs = ctx.Pipe()
worker = ctx.Process(target=child, args=(lock_path(sys.argv[1]), theirs))
worker.start()
print(worker.pid, flush=True)  # only this process writes the pipe the test reads, in order
print('child holds a copy:', ours.recv(), flush=True)
sys.stdin.readline()
os._exit(0)  # as the pre-emption exit does: no teardown, the child is left running
"""


def test_a_forked_child_does_not_keep_the_lock_after_its_trainer(tmp_path, subprocess_env):
    """A loader worker (a forked child) closes its copy of the lock at fork: the trainer keeps
    the lock while it runs, and the moment it exits the work dir is free, although the child
    still runs (before, the child's copy kept the flock, and a resume exited 75)."""
    proc = subprocess.Popen([sys.executable, '-c', FORKED, str(tmp_path)], env=subprocess_env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    stuck = threading.Timer(120, proc.kill)  # a child that never says it ends the reads
    stuck.start()
    try:
        child = int(proc.stdout.readline())
        assert proc.stdout.readline().strip() == 'child holds a copy: False'
        with pytest.raises(WorkDirBusy):
            check_work_dir_free(str(tmp_path))  # the trainer's own lock stays
        proc.stdin.write('\n')
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
        assert Path(f'/proc/{child}').exists()  # its child lives on, and holds nothing
        lock = hold_work_dir(str(tmp_path))
        assert lock.held
    finally:
        stuck.cancel()
        release_work_dir(str(tmp_path))
        if proc.poll() is None:
            proc.kill()
        subprocess.run(['pkill', '-KILL', '-f', str(tmp_path)], check=False)


def test_a_resume_waits_a_bounded_time_for_a_holder_that_goes_and_says_so(tmp_path, holder):
    proc = holder(tmp_path)
    said = []
    threading.Timer(0.6, lambda: (proc.stdin.close(), proc.wait())).start()
    lock = hold_work_dir(str(tmp_path), wait_s=60, say=said.append)
    try:
        assert lock.held
        assert said[0] == (f'work dir {tmp_path} is still held by pid {proc.pid} on host '
                           f'{socket.gethostname()} since {read_holder_since(said[0])}; waiting up '
                           'to 60 s for it to end')
        assert re.fullmatch(rf'work dir {re.escape(str(tmp_path))} is free after \d+\.\d s',
                            said[1]), said
    finally:
        release_work_dir(str(tmp_path))


def read_holder_since(line: str) -> str:
    return line.split(' since ')[1].split(';')[0]


def test_a_holder_that_stays_is_refused_after_the_wait(tmp_path, holder):
    proc = holder(tmp_path)
    said = []
    start = time.monotonic()
    with pytest.raises(WorkDirBusy) as busy:
        hold_work_dir(str(tmp_path), wait_s=0.5, say=said.append)
    assert time.monotonic() - start >= 0.5  # it waited before refusing
    assert f'pid {proc.pid}' in str(busy.value) and len(said) == 1
    with pytest.raises(WorkDirBusy):
        check_work_dir_free(str(tmp_path), wait_s=0.5, say=said.append)
    threading.Timer(0.6, lambda: (proc.stdin.close(), proc.wait())).start()
    check_work_dir_free(str(tmp_path), wait_s=60, say=said.append)  # the probe waits as well
    assert said[-1].startswith(f'work dir {tmp_path} is free after ')
