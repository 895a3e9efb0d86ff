"""A run over several SLURM tasks, one per process (`slurm.nodes`), as DINOv2 runs.

Each task is one rank: its rank, local rank, world size and node come from SLURM's job
environment (through submitit's `JobEnvironment`: SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS,
SLURM_NODEID), the master is the first host of the job (SLURM_JOB_NODELIST). The rendezvous
cannot collide with anything else on the node: the task of global rank 0 hosts the TCP store
itself on a port the kernel gives it (bound, and kept while its training runs, so nothing can
take it in between), and writes host and port to ``rendezvous.json`` in the run's work dir
(several nodes need a shared file system anyway), tagged with the job and its restart count;
the other tasks read it there. Every training process then joins as a client of that store,
as under torchrun (``TORCHELASTIC_USE_AGENT_STORE``).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from benchmark.atomic_io import atomic_write_text

RENDEZVOUS_FILE = 'rendezvous.json'  # in the run's work dir: where rank 0's task hosts the store
RENDEZVOUS_WAIT_S = 600.0  # how long the other tasks wait for it (the nodes start apart)


def attempt() -> str:
    """This start of the job: '<job id>.<restart count>' (a requeue is a new attempt)."""
    return f"{os.environ.get('SLURM_JOB_ID', '?')}.{os.environ.get('SLURM_RESTART_COUNT') or 0}"


def rendezvous(work_dir: str, job_env, wait_s: float = RENDEZVOUS_WAIT_S) -> Tuple[
        Optional[Any], str, int]:
    """(store or None, master address, port): rank 0 hosts the store and writes where; the
    others wait for this attempt's line (at most `wait_s`).

    Raises:
        RuntimeError: No line of this attempt within `wait_s`.
    """
    path = Path(work_dir) / RENDEZVOUS_FILE
    if job_env.global_rank == 0:
        from torch.distributed import TCPStore
        store = TCPStore(job_env.hostnames[0], 0, None, True, wait_for_workers=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(str(path), json.dumps(dict(
            attempt=attempt(), addr=job_env.hostnames[0], port=store.port)) + '\n')
        return store, job_env.hostnames[0], store.port
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            line = json.loads(path.read_text())
        except (OSError, ValueError):
            line = {}
        if line.get('attempt') == attempt():
            return None, line['addr'], int(line['port'])
        time.sleep(0.2)
    raise RuntimeError(f'rank {job_env.global_rank}: the task of rank 0 did not say where it '
                       f'hosts the rendezvous within {wait_s:.0f} s ({path})')


def rank_env(job_env, addr: str, port: int) -> Dict[str, str]:
    """The environment of the task's training process: its rank and world, the store."""
    per_node = max(job_env.num_tasks // max(job_env.num_nodes, 1), 1)
    return dict(RANK=str(job_env.global_rank), LOCAL_RANK=str(job_env.local_rank),
                WORLD_SIZE=str(job_env.num_tasks), LOCAL_WORLD_SIZE=str(per_node),
                GROUP_RANK=str(job_env.node), MASTER_ADDR=addr, MASTER_PORT=str(port),
                TORCHELASTIC_USE_AGENT_STORE='True', TRAIN_HOLD_SIGNALS='1')
