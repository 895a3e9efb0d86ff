"""benchmark.stop: the first SIGINT/SIGTERM unwinds the work and ends with one line and
128 + the signal; a second ends at once without a half-written file; children end with the
tool. Real signals to this process, caught by the handler under test."""
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmark import atomic_io, stop


def _signalled(sig, then=lambda: None):
    """Work that sends itself ``sig`` after finishing part 'a' of parts a, b."""
    def work() -> int:
        stop.plan(['a', 'b'])
        stop.finished('a')
        os.kill(os.getpid(), sig)
        then()
        time.sleep(5)
        raise AssertionError('the signal did not stop the work')
    return work


@pytest.mark.parametrize('sig, code', [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_first_signal_unwinds_says_what_was_finished_and_exits_128_plus_it(sig, code, capsys):
    before = signal.getsignal(sig)
    unwound = []

    def work() -> int:
        try:
            return _signalled(sig)()
        finally:
            unwound.append(True)
    assert stop.stoppable(work) == code
    assert unwound == [True]
    assert capsys.readouterr().err.splitlines() == [
        f'{sig.name}: stopped; finished a; not finished: b']
    assert signal.getsignal(sig) is before  # the caller's handler back
    assert stop.stoppable(lambda: 7) == 7  # no signal: the work's own code


def test_an_error_the_stop_caused_still_ends_as_the_stop(capsys):
    """A dying loader worker makes torch raise a RuntimeError: the stop's code, not an error."""
    def work() -> int:
        try:
            _signalled(signal.SIGINT)()
        except KeyboardInterrupt:
            raise RuntimeError('DataLoader worker exited unexpectedly') from None
    assert stop.stoppable(work) == 130
    assert 'SIGINT: stopped' in capsys.readouterr().err


def test_second_signal_ends_at_once_leaving_no_temporary_file(tmp_path, monkeypatch, capsys):
    """The second SIGINT during a write: os._exit with the first signal's code; the final file
    keeps its old content and the write's temporary file is gone."""
    target = tmp_path / 'result.json'
    target.write_text('old\n')
    exits = []

    def fake_exit(code):  # what the disk holds as the process ends
        exits.append((code, sorted(os.listdir(tmp_path)), target.read_text()))
        raise SystemExit(code)

    monkeypatch.setattr(stop, 'exit_at_once', fake_exit)  # os._exit after multiprocessing's folder

    def write(tmp: str) -> None:
        with open(tmp, 'w') as handle:
            handle.write('half')
            handle.flush()
            os.kill(os.getpid(), signal.SIGINT)  # the second: during the write
            time.sleep(5)

    def work() -> int:
        try:
            _signalled(signal.SIGTERM)()
        finally:  # the unwinding writes a file, and a second stop comes during it
            atomic_io.atomic_write(str(target), write)

    stop.stoppable(work)
    assert exits == [(143, ['result.json'], 'old\n')]  # the first signal's code
    assert 'SIGTERM again: ended at once; finished a; not finished: b' in capsys.readouterr().err


def _sleep() -> None:
    time.sleep(60)


def test_children_end_with_the_tool():
    """A multiprocessing worker and a subprocess in a session of its own (with a child of its
    own) are ended by the stop; none is left."""
    worker = multiprocessing.get_context('fork').Process(target=_sleep, daemon=True)
    child = subprocess.Popen(['bash', '-c', 'sleep 60 & wait'], start_new_session=True)

    def work() -> int:
        worker.start()
        _signalled(signal.SIGINT)()
    try:
        assert stop.stoppable(work) == 130
        assert not worker.is_alive() and child.wait(timeout=5) is not None
        for _ in range(50):  # bash's own child (sleep) went too, reaped by init in moments
            group = subprocess.run(['pgrep', '-g', str(child.pid)], capture_output=True,
                                   text=True).stdout.split()
            if not group:
                break
            time.sleep(0.1)
        assert group == []
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)


def test_child_pids_lists_live_children_only():
    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])
    try:
        assert child.pid in stop.child_pids()
    finally:
        child.kill()
        child.wait()
    assert child.pid not in stop.child_pids()


KILLED_TOOL = '''
import multiprocessing, os, signal, time
from benchmark import stop
def work():
    worker = multiprocessing.get_context('fork').Process(target=time.sleep, args=(60,))
    worker.start()
    print(worker.pid, flush=True)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
stop.stoppable(work)
'''


def test_a_tool_killed_outright_takes_its_forked_workers_with_it(subprocess_env):
    """SIGKILL, which nothing can catch: the worker the tool forked dies with it (its
    parent-death signal) instead of running on under init."""
    tool = subprocess.run([sys.executable, '-c', KILLED_TOOL], capture_output=True, text=True,
                          env=subprocess_env, timeout=60)
    assert tool.returncode == -signal.SIGKILL, tool.stderr
    worker = int(tool.stdout.split()[0])
    for _ in range(50):
        state = _state_of(worker)
        if state in (None, 'Z'):  # gone, or dead and not yet reaped
            break
        time.sleep(0.1)
    assert state in (None, 'Z'), state


def _state_of(pid: int):
    try:
        with open(f'/proc/{pid}/stat') as handle:
            return handle.read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return None


def test_an_exit_at_once_leaves_no_multiprocessing_folder(tmp_path, subprocess_env):
    """A stopped tool ends with os._exit (its teardown skipped), which also skips
    multiprocessing's removal of its pymp-* folder: exit_at_once removes it first."""
    code = ('import multiprocessing.util, os\n'
            'from benchmark import stop\n'
            'folder = multiprocessing.util.get_temp_dir()\n'
            'open(os.path.join(folder, "listener"), "w").close()\n'
            'stop.exit_at_once(130)\n')
    env = dict(subprocess_env, TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, '-c', code], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_workers_forked_during_the_work_share_the_tools_multiprocessing_folder():
    """A loader worker forked inside `stoppable` finds the tool's pymp-* folder and makes none of
    its own, which it would leave behind if it were killed (exit_at_once removes the tool's)."""
    def work() -> int:
        with multiprocessing.get_context('fork').Pool(1) as pool:
            theirs = pool.apply(multiprocessing.util.get_temp_dir)
        return 0 if theirs == multiprocessing.util.get_temp_dir() else 1
    assert stop.stoppable(work) == 0
