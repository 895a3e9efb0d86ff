"""Child processes of a suite: output appended to a log, a termination forwarded; the slots
several runs at once go to (their GPUs, or CPU cores and threads).

A suite killed outright takes its children down with them (each child's parent-death signal),
so a restart with the same command resumes instead of racing an orphan.
"""
from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from benchmark.engine.progress import duration  # noqa: F401  (re-exported: the suite's times)
from benchmark.layout import attempt_header
from benchmark.suites.parent_death import die_with_parent
from benchmark.suites.spec import SuiteError

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
        die_with_parent()
        if self.cpus is not None and hasattr(os, 'sched_setaffinity'):
            os.sched_setaffinity(0, self.cpus)

    def start(self, cmd: List[str], log: str) -> None:
        """Start `cmd` with its output appended to `log` (a header line first)."""
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, 'a', encoding='utf-8') as handle:
            handle.write(attempt_header(cmd))
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


@dataclass
class Slot:
    """Where a run goes: its environment additions, CPU cores and a description."""

    number: int
    env: Dict[str, str] = field(default_factory=dict)
    cpus: Optional[List[int]] = None
    where: str = ''


def visible_gpus(env: Dict[str, str]) -> List[str]:
    """The GPU ids a child may be given (entries of CUDA_VISIBLE_DEVICES, else 0..n-1)."""
    import torch
    if not torch.cuda.is_available():
        return []
    count = torch.cuda.device_count()
    listed = env.get('CUDA_VISIBLE_DEVICES')
    ids = ([s.strip() for s in listed.split(',') if s.strip()] if listed
           else [str(i) for i in range(count)])
    return ids[:count]


def usable_cores() -> List[int]:
    """The CPU cores this process may run on."""
    if hasattr(os, 'sched_getaffinity'):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))  # pragma: no cover - not Linux


def _span(cores: Sequence[int]) -> str:
    """'CPUs 0-3', 'CPU 2', 'CPUs 0,2,5'."""
    if len(cores) == 1:
        return f'CPU {cores[0]}'
    if list(cores) == list(range(cores[0], cores[0] + len(cores))):
        return f'CPUs {cores[0]}-{cores[-1]}'
    return 'CPUs ' + ','.join(map(str, cores))


def plan_slots(parallel: int, procs: int, gpus: Sequence[str], cores: Sequence[int]) -> List[Slot]:
    """The slots of `parallel` runs of `procs` processes each: one slot, as it is, for one run
    at a time; else `procs` GPUs each, or on no GPU an even share of `cores`.

    Raises:
        SuiteError: More GPUs needed than visible.
    """
    if parallel == 1:
        return [Slot(1)]
    if gpus:
        if parallel * procs > len(gpus):
            raise SuiteError(f'--parallel {parallel} with {procs} process(es) per run needs '
                             f'{parallel * procs} GPUs; {len(gpus)} visible: lower --parallel '
                             'or --procs')
        return [Slot(k + 1, {'CUDA_VISIBLE_DEVICES': ','.join(gpus[k * procs:(k + 1) * procs])},
                     None, 'GPUs ' + ','.join(gpus[k * procs:(k + 1) * procs]))
                for k in range(parallel)]
    slots, cores = [], sorted(cores)
    for k in range(parallel):
        mine = (cores[k * len(cores) // parallel:(k + 1) * len(cores) // parallel]
                if parallel <= len(cores) else [cores[k % len(cores)]])
        threads = max(1, len(mine) // procs)
        slots.append(Slot(k + 1, {'OMP_NUM_THREADS': str(threads)}, mine,
                          f'{_span(mine)}, {threads} thread(s) per process'))
    return slots
