"""Ctrl-C and SIGTERM to a tool: stop at a safe point, say what was finished, exit 130 or 143.

Every tool runs its work through `stoppable` (`benchmark.cli.run_tool` does it for them). The
first SIGINT or SIGTERM raises `Stopped` (a KeyboardInterrupt) in the main thread as soon as
the running C call returns: the work unwinds through its ``finally`` blocks (temporary folders
removed; a file written through `benchmark.atomic_io` is replaced whole or left as it was),
the child processes are ended (`stop_workers`: the loader workers; a training child saves and
exits 143 as on a pre-emption), one line on stderr says what was finished and what was not
(`plan`, `finished`), and the tool exits 128 + the signal: 130 for SIGINT, 143 for SIGTERM.
A second SIGINT or SIGTERM ends the process at once (`hard_exit`): the loader workers killed,
other children sent SIGTERM, the temporary file of a write in flight removed, so no file is
left half-written. A tool that owns trainings (the suite) forwards the first signal to them
itself and waits for their saves; its children also get SIGTERM if it dies (Linux's
PR_SET_PDEATHSIG, `die_with_parent`), and its loader workers SIGKILL.

Standard library only, like the rest of the foundation.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.util
import os
import shutil
import signal
import sys
import time
from typing import Callable, List, Optional, Sequence

from benchmark import atomic_io, dist

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PR_SET_PDEATHSIG = 1  # prctl(2)
try:  # resolved here, not in a child between fork and exec, which only calls it
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _PRCTL = None
CTRL_C = (signal.SIGINT,)  # a training's own: SIGTERM is its pre-emption (PreemptionHook)


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by the first SIGINT or SIGTERM a `stoppable` tool gets."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _State:
    def __init__(self) -> None:
        self.signum: Optional[int] = None  # the first stop signal, once one came
        self.owner = 0  # the pid that installed the handler (forked children do not act)
        self.todo: List[str] = []  # the parts not finished yet, in order
        self.done: List[str] = []  # the parts finished, in order


_state = _State()


def exit_code(signum: int) -> int:
    """128 + the signal number, what shells and schedulers read: 130 SIGINT, 143 SIGTERM."""
    return 128 + int(signum)


def requested() -> Optional[int]:
    """The stop signal that came (its number), or None."""
    return _state.signum


def plan(parts: Sequence[str]) -> None:
    """Name the parts the tool will do, in order: the stop line lists those not finished."""
    _state.todo = [p for p in parts if p not in _state.done]


def finished(part: str) -> None:
    """Mark a part finished (planned or not): the stop line names it."""
    _state.done.append(part)
    if part in _state.todo:
        _state.todo.remove(part)


def summary() -> str:
    """'finished A, B; not finished: C, D' from the parts marked so far."""
    done = ', '.join(_state.done) if _state.done else 'nothing'
    rest = f'; not finished: {", ".join(_state.todo)}' if _state.todo else ''
    return f'finished {done}{rest}'


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Linux: the kernel sends ``sig`` to this process when its parent dies (PR_SET_PDEATHSIG);
    safe between fork and exec (it calls only the prctl resolved at import)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _forked(state: _State) -> None:
    """In a child the tool forks through multiprocessing (a loader worker, which only reads
    data): killed when the tool dies, even by SIGKILL, instead of running on re-parented."""
    if os.getppid() == state.owner:
        die_with_parent(signal.SIGKILL)
        if os.getppid() != state.owner:  # it died before the call
            os._exit(1)


def child_pids() -> List[int]:
    """The live child processes of this one (Linux's /proc; elsewhere none)."""
    me, out = str(os.getpid()), []
    for name in os.listdir('/proc') if os.path.isdir('/proc') else []:
        try:
            with open(f'/proc/{name}/stat') as handle:
                fields = handle.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or gone
        if fields[1] == me and fields[0] != 'Z':
            out.append(int(name))
    return out


def _signal(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid:  # leads its own group (a job started in a session)
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reaped(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:  # reaped already (by its Popen)
        return True


def stop_workers(timeout_s: float = 5.0) -> List[int]:
    """End the processes this one started: SIGTERM to the loader workers (from their parent it
    ends them at once) and to every other child (a training saves and exits 143; one leading
    its own process group gets it for the whole group), joined; one still there after
    ``timeout_s`` seconds is killed. The pids that had to be killed."""
    workers = multiprocessing.active_children()
    others = [pid for pid in child_pids() if pid not in {w.pid for w in workers}]
    for worker in workers:
        worker.terminate()
    for pid in others:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    while others and time.monotonic() < deadline:
        others = [pid for pid in others if not _reaped(pid)]
        time.sleep(0.05)
    killed = [w.pid for w in workers if w.is_alive()] + others
    for worker in workers:
        if worker.is_alive():
            worker.kill()
            worker.join(1.0)
    for pid in others:
        _signal(pid, signal.SIGKILL)
    return killed


def _handle(signum: int, frame) -> None:  # noqa: ARG001
    if os.getpid() != _state.owner:  # a forked child (a loader worker): the default action
        if signum == signal.SIGINT:
            raise KeyboardInterrupt  # which torch's workers take as the end
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if _state.signum is None:
        _state.signum = signum
        raise Stopped(signum)
    hard_exit(_state.signum)


def hard_exit(signum: int) -> None:
    """The second stop: kill the loader workers (they only read data), SIGTERM every other
    child (a training saves and exits 143), remove the temporary file of a write in flight,
    say so in one line, ``os._exit`` with the first signal's code."""
    workers = {worker.pid for worker in multiprocessing.active_children()}
    for pid in child_pids():
        _signal(pid, signal.SIGKILL if pid in workers else signal.SIGTERM)
    atomic_io.abandon_writes()
    sys.stderr.write(f'{signal.Signals(signum).name} again: ended at once; {summary()}; '
                     f'a file being written was left as it was\n')
    sys.stderr.flush()
    exit_at_once(exit_code(signum))


def exit_at_once(code: int) -> None:
    """``os._exit(code)``, skipping the interpreter's teardown, without the ``pymp-*`` folder
    multiprocessing keeps in the temporary directory (its own removal is an exit handler, which
    ``os._exit`` skips; a loader worker handing a batch over may have made one)."""
    shutil.rmtree(multiprocessing.util.get_temp_dir(), ignore_errors=True)
    os._exit(code)


def report(signum: int, note: str = '') -> int:
    """After the unwinding: end the child processes, print the stop line (``note`` in place
    of the parts where none were named), the exit code."""
    stop_workers()
    detail = note if note and not (_state.done or _state.todo) else summary()
    if dist.is_main():  # a multi-process training says it once
        print(f'{signal.Signals(signum).name}: stopped; {detail}', file=sys.stderr, flush=True)
    return exit_code(signum)


def stoppable(work: Callable[[], int], signals: Sequence[int] = STOP_SIGNALS,
              note: str = '', exit_now: bool = False) -> int:
    """``work()`` with ``signals`` as stop requests (the module's docstring); its exit code,
    or 128 + the signal when one came, even if the work ended another way (an error a dying
    loader worker caused, a code returned after catching the stop). ``exit_now``: a stopped
    process ends right after its line, skipping the interpreter's teardown (a training's
    libraries can take seconds there)."""
    previous = {sig: signal.signal(sig, _handle) for sig in signals}
    # taken here even where the caller blocked them (a service manager, a test runner)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    _state.__init__()
    _state.owner = os.getpid()
    multiprocessing.util.register_after_fork(_state, _forked)
    # multiprocessing's pymp-* folder made now: the loader workers forked later use this one
    # (a worker that made its own and was then killed would leave it behind), and it goes with
    # this process (its exit handler, or exit_at_once)
    multiprocessing.util.get_temp_dir()
    try:
        code = work()
    except BaseException:
        if _state.signum is None:
            raise
        code = None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        if _state.signum is None:
            return code
        code = report(_state.signum, note)
        if exit_now:
            sys.stdout.flush()
            exit_at_once(code)
        return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
