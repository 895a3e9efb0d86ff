"""Loader workers leave pre-emption signals to the trainer.

A scheduler pre-empts a job by signalling every process of it at once (SLURM's pre-emption and
``scancel`` send SIGTERM to each process of the job step; ``kill -- -PGID`` to a process group),
the DataLoader workers included. torch's workers die of a SIGTERM that does not come from their
trainer, and the trainer then fails at its next batch ("DataLoader worker ... is killed by signal:
Terminated") instead of finishing its step and saving. `WorkerSignals` (a ``worker_init_fn``
wrapper) makes a worker ignore SIGTERM and SIGUSR1 from anyone but its trainer: the trainer
decides, saves, ends its workers (`stop_workers`) and exits. A SIGTERM from the trainer itself
(torch's shutdown of a worker that did not stop in time) still ends the worker at once, as it
does in torch.
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Callable, Optional

from benchmark.stop import stop_workers  # noqa: F401  (the trainer's end of its workers)

LEFT_TO_TRAINER = (signal.SIGTERM, signal.SIGUSR1)


def leave_signals_to_trainer() -> None:
    """In a loader worker: from now on SIGTERM and SIGUSR1 are ignored unless the trainer (this
    worker's parent) sends SIGTERM, which ends the worker.

    The signals are blocked in the worker and taken by one thread with ``sigwaitinfo``, which
    sees who sent them (a Python signal handler does not). That needs the worker to be the only
    thread of its process, as a forked worker usually is. A worker started by spawn or
    forkserver runs other threads already (which a blocked mask would not cover) and its parent
    is not the trainer, and a forked one does where a library restarts its threads in every
    forked child (OpenTelemetry's exporters, which some tracking clients start, do); there, and where ``sigwaitinfo`` does not exist (macOS), both signals are ignored
    outright, and the worker ends when the trainer stops it or dies (torch's watchdog).
    """
    if not hasattr(signal, 'sigwaitinfo') or threading.active_count() > 1:
        for sig in LEFT_TO_TRAINER:
            signal.signal(sig, signal.SIG_IGN)
        return
    trainer = os.getppid()
    # Blocked before the thread starts, which inherits the mask, as does any thread started
    # later: no thread of the worker is killed by them, the waiting thread takes them all.
    signal.pthread_sigmask(signal.SIG_BLOCK, LEFT_TO_TRAINER)

    def wait() -> None:
        while True:
            info = signal.sigwaitinfo(LEFT_TO_TRAINER)
            if info.si_signo == signal.SIGTERM and info.si_pid == trainer:
                os._exit(0)  # torch's rule: the trainer ending its worker

    threading.Thread(target=wait, name='loader-worker-signals', daemon=True).start()


class WorkerSignals:
    """A ``worker_init_fn`` that calls `leave_signals_to_trainer`, then the loader's own.

    A class, not a closure, so that workers started by spawn or forkserver can unpickle it.

    Args:
        inner: The loader's ``worker_init_fn`` (mmengine's seeding), or None.
    """

    def __init__(self, inner: Optional[Callable[[int], None]] = None) -> None:
        self.inner = inner

    def __call__(self, worker_id: int) -> None:
        leave_signals_to_trainer()
        if self.inner is not None:
            self.inner(worker_id)


def protect_loader_workers(loader) -> None:
    """Make the workers ``loader`` starts from now on leave SIGTERM/SIGUSR1 to the trainer
    (set before its first iterator is made; a loader without workers is left alone)."""
    if getattr(loader, 'num_workers', 0) and not isinstance(loader.worker_init_fn, WorkerSignals):
        loader.worker_init_fn = WorkerSignals(loader.worker_init_fn)
