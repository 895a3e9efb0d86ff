"""SIGTERM / SIGUSR1 that come before the training loop: held, not fatal.

A scheduler may pre-empt a job seconds after it starts, while its processes import, build the
model or load the checkpoint to resume: with the default action the process would die there,
and a multi-process job would end with torchrun's failure instead of 143. tools/train.py
calls `hold` first thing; `PreemptionHook` takes a held signal over when the training starts
(`take`) and acts on it after the first step, as on any other. Where no such hook will run
(a config without it), `release` puts the default action back and delivers a held signal
again. tools/dist_train.sh asks for it (TRAIN_HOLD_SIGNALS=1) for its training processes:
importing this module then holds at once; it is the first thing tools/train.py imports and
uses the standard library only, so holding starts before the heavy imports.

Such a process also ends with its launcher (`with_launcher`): if torchrun dies (killed, or
killed because tools/dist_train.sh was), the kernel sends it SIGTERM (Linux's
PR_SET_PDEATHSIG), which it takes as a pre-emption: it saves and exits rather than train on
unseen, holding its work dir.
"""
import ctypes
import os
import signal
from typing import List, Optional

SIGNALS = ('SIGTERM', 'SIGUSR1')
HOLD_ENV = 'TRAIN_HOLD_SIGNALS'
_held: List[str] = []


def _record(signum, frame) -> None:  # noqa: ARG001
    _held.append(signal.Signals(signum).name)


def hold() -> None:
    """From now on, record SIGTERM and SIGUSR1 instead of dying of them. A launcher may start
    the process with them blocked (tools/dist_train.sh): they are unblocked here, once
    recorded, and one that came before is recorded now."""
    for name in SIGNALS:
        signal.signal(getattr(signal, name), _record)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {getattr(signal, name) for name in SIGNALS})


def take() -> Optional[str]:
    """The last signal held (None if none), forgotten here: its taker acts on it."""
    name = _held[-1] if _held else None
    _held.clear()
    return name


def release() -> None:
    """Back to the default action; a held signal is delivered again (the process ends of it)."""
    for name in SIGNALS:
        if signal.getsignal(getattr(signal, name)) is _record:
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    name = take()
    if name is not None:
        os.kill(os.getpid(), getattr(signal, name))


PR_SET_PDEATHSIG = 1  # prctl(2)


def with_launcher(sig: int = signal.SIGTERM) -> bool:
    """Linux: have the kernel send ``sig`` to this process when its parent (the launcher) ends;
    one that has ended already (this process is an orphan) sends it at once. False where prctl
    is not there."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return False
    if prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() == 1:  # the launcher went before the call
        os.kill(os.getpid(), sig)
    return True


if os.environ.get(HOLD_ENV) == '1':
    hold()
    with_launcher()
