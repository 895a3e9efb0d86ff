"""What SLURM's queue says about a run: its job still queued or running, ended, or unknown.

A run's work dir records the job that carries it out (``slurm_job_id``, written after the
submission) and, while a launch submits it, a note of that submission (``slurm_submitting``:
pid, host and time, written before ``sbatch`` and removed once the job id is recorded). The
planner waits for a run whose job squeue still lists. A note left without a job id (the
launch was killed between ``sbatch`` and recording the id) counts as queued while squeue lists
a job named after the suite (the array's name), so a second launch never submits the run again.

squeue failing (the controller unreachable, a timeout) is not "not queued": it is asked again,
then the launch stops in one line and submits nothing. A job SLURM no longer knows ("Invalid
job id") has ended. Without squeue on this machine nothing can be queued through it.
`wait_task` (``--wait``) ends the wait for a task that left the queue without a result.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, List, Optional

from benchmark.atomic_io import atomic_write_text
from benchmark.layout import SLURM_JOB_FILE, SLURM_SUBMITTING_FILE
from benchmark.suites.spec import SuiteError

SQUEUE_TRIES = 3  # squeue is asked this many times before the launch stops
SQUEUE_RETRY_S = 2.0  # seconds before the second try (then twice that, ...)
SQUEUE_TIMEOUT_S = 60
WAIT_POLL_S = 5.0  # --wait: how often a task's result and squeue are looked at
WAIT_MISSES = 3  # polls in a row that squeue no longer lists a task without a result: ended


def _squeue(args: List[str], what: str) -> Optional[str]:
    """squeue's output for `args`; None where SLURM does not know the job or has no squeue.

    Raises:
        SuiteError: squeue failed SQUEUE_TRIES times.
    """
    why = ''
    for attempt in range(SQUEUE_TRIES):
        if attempt:
            time.sleep(SQUEUE_RETRY_S * attempt)
        try:
            out = subprocess.run(['squeue', '-h', *args], capture_output=True, text=True,
                                 timeout=SQUEUE_TIMEOUT_S)
        except FileNotFoundError:
            return None
        except (OSError, subprocess.TimeoutExpired) as err:
            why = str(err)
            continue
        if out.returncode == 0:
            return out.stdout
        if 'invalid job id' in out.stderr.lower():
            return None
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        why = f"exit {out.returncode}: {lines[-1].strip() if lines else 'no message'}"
    raise SuiteError(f'squeue failed {SQUEUE_TRIES} times asking about {what} ({why}): whether '
                     'it is still queued is unknown, so nothing was submitted; run the same '
                     'command again when the SLURM controller answers')


def squeue_alive(job: str) -> bool:
    """The SLURM job is pending, running or completing (squeue still lists it).

    Raises:
        SuiteError: squeue keeps failing: the job's state is unknown.
    """
    return bool((_squeue(['-j', job, '-o', '%T'], f'SLURM job {job}') or '').strip())


def named_jobs_alive(name: str) -> List[str]:
    """The ids of this user's jobs named `name` that squeue lists (pending, running, ...).

    Raises:
        SuiteError: squeue keeps failing.
    """
    user = os.environ.get('USER') or str(os.getuid())
    out = _squeue(['-u', user, '-n', name, '-o', '%i'], f'the jobs named {name!r}') or ''
    return [line.strip() for line in out.splitlines() if line.strip()]


# -- a run's job id and the note of its submission ---------------------------------------------

def read_job(work_dir: str) -> Optional[str]:
    """The SLURM job id the suite last submitted for this work dir, if any."""
    path = Path(work_dir) / SLURM_JOB_FILE
    if not path.is_file():
        return None
    return path.read_text().strip() or None


def read_submitting(work_dir: str) -> Optional[dict]:
    """The note of a submission of this work dir that has not recorded its job id, if any."""
    path = Path(work_dir) / SLURM_SUBMITTING_FILE
    try:
        note = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        note = {}
    return note if isinstance(note, dict) else {}


def note_submitting(work_dir: str, suite: str) -> None:
    """Before sbatch: this process is submitting the run (durable, replaced atomically)."""
    atomic_write_text(str(Path(work_dir) / SLURM_SUBMITTING_FILE), json.dumps(dict(
        suite=suite, pid=os.getpid(), host=socket.gethostname(),
        time=datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC'))) + '\n')


def record_job(work_dir: str, job: str) -> None:
    """After sbatch: the run's job id, then the note removed."""
    atomic_write_text(str(Path(work_dir) / SLURM_JOB_FILE), job + '\n')
    drop_submitting(work_dir)


def drop_submitting(work_dir: str) -> None:
    """The note removed (the submission recorded its job, or sbatch refused it)."""
    try:
        os.unlink(Path(work_dir) / SLURM_SUBMITTING_FILE)
    except FileNotFoundError:
        pass


def queued_job(work_dir: str, suite: str) -> Optional[str]:
    """The job a run waits for: its recorded job while squeue lists it, else, where a
    submission's note has no job id, the jobs named after the suite ('4241 (unrecorded)').

    Raises:
        SuiteError: squeue keeps failing.
    """
    job = read_job(work_dir)
    note = read_submitting(work_dir)
    if note is not None:
        alive = named_jobs_alive(note.get('suite') or suite)
        if alive:
            jobs = sorted({a.split('_')[0] for a in alive})
            return f"{', '.join(jobs)} named {note.get('suite') or suite} (task not recorded)"
    if job and squeue_alive(job):
        return job
    return None


def wait_task(job, alive: Callable[[str], bool] = squeue_alive,
              poll_s: float = WAIT_POLL_S) -> bool:
    """Wait for a submitted SLURM task: True once it has a result (or submitit's watcher, which
    asks sacct, says it is done); False once squeue has not listed it for WAIT_MISSES polls in a
    row without a result (cancelled, or killed before writing one). Without accounting sacct
    knows no job, and submitit alone would wait for such a task forever. A squeue that keeps
    failing meanwhile counts as "still listed"."""
    misses = 0
    while not job.done():
        try:
            listed = alive(job.job_id)
        except SuiteError:
            listed = True
        misses = 0 if listed else misses + 1
        if misses >= WAIT_MISSES:
            return job.paths.result_pickle.exists()
        time.sleep(poll_s)
    return True
