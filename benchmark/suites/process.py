"""One child process at a time, its output appended to a log, a termination forwarded to it.

A suite killed outright takes its child down with it (the child's parent-death signal), so a
restart with the same command resumes instead of racing an orphan.
"""
from __future__ import annotations

import ctypes
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGTERM this child when the suite dies (PR_SET_PDEATHSIG), as a pre-emption."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def duration(seconds: float) -> str:
    """'3m05s', or '42s' under a minute."""
    minutes, secs = divmod(int(round(seconds)), 60)
    return f'{minutes}m{secs:02d}s' if minutes else f'{secs}s'


class LoggedChild:
    """Runs one command at a time in its own session, output appended to a log file."""

    def __init__(self, env: Dict[str, str]) -> None:
        self.env = env
        self.proc: Optional[subprocess.Popen] = None
        self.stopping = False

    def terminate(self) -> None:
        """SIGTERM the running command (a training run saves and exits 143); a command being
        started right now gets it as soon as it runs."""
        self.stopping = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def run(self, cmd: List[str], log: str) -> int:
        """Run `cmd` with its output appended to `log`; its exit status."""
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, 'a', encoding='utf-8') as handle:
            handle.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} "
                         f'{" ".join(shlex.quote(c) for c in cmd)}\n')
            handle.flush()
            self.proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT,
                                         env=self.env, start_new_session=True,
                                         preexec_fn=_die_with_parent)
            if self.stopping:  # a termination that came while the child was being started
                self.proc.send_signal(signal.SIGTERM)
            try:
                while True:  # short waits: a signal taken by another thread (torch's, wandb's)
                    try:     # must not wait for the child's exit before it is forwarded
                        return self.proc.wait(timeout=0.5)
                    except subprocess.TimeoutExpired:
                        continue
            finally:
                self.proc = None
