"""Who holds a lock, as its file says: pid, host and since (flock files and leases alike)."""
from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Optional


@dataclass
class Holder:
    """Who holds a lock, as its file says."""

    pid: Optional[int] = None
    host: str = ''
    since: str = ''

    def describe(self) -> str:
        """'pid 4242 on host node7 since 2025-03-01 12:00:03 UTC' ('another process' if unknown)."""
        if self.pid is None:
            return 'another process'
        return f'pid {self.pid} on host {self.host or "?"} since {self.since or "?"}'

    def alive_here(self) -> Optional[bool]:
        """Whether the holder's pid runs on this host (None: another host, or unknown)."""
        if self.pid is None or self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def read_holder(path: str) -> Holder:
    """The holder a lock file names (an empty `Holder` when it names none)."""
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.loads(handle.read() or '{}')
        return Holder(int(data['pid']), str(data.get('host', '')), str(data.get('since', '')))
    except (OSError, ValueError, KeyError, TypeError):
        return Holder()
