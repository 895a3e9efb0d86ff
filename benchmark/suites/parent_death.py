"""A child that gets SIGTERM when its parent (the suite, a SLURM task) dies: Linux's
PR_SET_PDEATHSIG, set between fork and exec. Imports nothing heavy: a SLURM task loads it."""
import ctypes
import signal

try:  # resolved here, not in the child: the child between fork and exec only calls it
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _PRCTL = None


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGTERM this child when its parent (the suite, a task) dies (PR_SET_PDEATHSIG), as a
    pre-emption. Between fork and exec: calls only the prctl resolved at import."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)
