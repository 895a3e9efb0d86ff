"""Child processes of a suite: output appended to a log, a termination forwarded, optionally
pinned to CPU cores.

A suite killed outright takes its children down with them (each child's parent-death signal),
so a restart with the same command resumes instead of racing an orphan.
"""
from __future__ import annotations

import ctypes
import os
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Collection, Dict, List, Optional, Sequence

from benchmark.engine.progress import duration  # noqa: F401  (re-exported: the suite's times)

try:  # resolved here, not in the child: the child between fork and exec only calls it
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _PRCTL = None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGTERM this child when the suite dies (PR_SET_PDEATHSIG), as a pre-emption."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)


def free_port(taken: Collection[int] = ()) -> int:
    """A TCP port free on this machine now and not in `taken` (the ports handed to runs still
    running: two runs started together never get the same rendezvous port)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(('127.0.0.1', 0))
            port = sock.getsockname()[1]
        if port not in taken:
            return port
    raise OSError('no free TCP port found for a run\'s rendezvous')


class LoggedChild:
    """Runs one command at a time in its own session, output appended to a log file.

    Args:
        env: The command's environment.
        cpus: CPU cores the command and everything it starts may run on (None: all of this
            process's).
    """

    def __init__(self, env: Dict[str, str], cpus: Optional[Sequence[int]] = None) -> None:
        self.env = env
        self.cpus = list(cpus) if cpus is not None else None
        self.proc: Optional[subprocess.Popen] = None
        self.stopping = False

    def terminate(self) -> None:
        """SIGTERM the running command (a training run saves and exits 143); a command being
        started right now, or started later, gets it as soon as it runs."""
        self.stopping = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def _preexec(self) -> None:  # pragma: no cover - runs in the child before exec
        _die_with_parent()
        if self.cpus is not None and hasattr(os, 'sched_setaffinity'):
            os.sched_setaffinity(0, self.cpus)

    def start(self, cmd: List[str], log: str) -> None:
        """Start `cmd` with its output appended to `log` (a header line first)."""
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, 'a', encoding='utf-8') as handle:
            handle.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} "
                         f'{" ".join(shlex.quote(c) for c in cmd)}\n')
            handle.flush()
            self.proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT,
                                         env=self.env, start_new_session=True,
                                         preexec_fn=self._preexec)
        if self.stopping:  # a termination that came while the child was being started
            self.proc.send_signal(signal.SIGTERM)

    def poll(self) -> Optional[int]:
        """The started command's exit status once it has ended (then nothing runs), else None."""
        if self.proc is None:
            raise RuntimeError('poll() without a started command')
        code = self.proc.poll()
        if code is not None:
            self.proc = None
        return code

    def run(self, cmd: List[str], log: str) -> int:
        """Run `cmd` with its output appended to `log`; its exit status."""
        self.start(cmd, log)
        proc = self.proc
        try:
            while True:  # short waits: a signal taken by another thread (torch's, wandb's)
                try:     # must not wait for the child's exit before it is forwarded
                    return proc.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    continue
        finally:
            self.proc = None
