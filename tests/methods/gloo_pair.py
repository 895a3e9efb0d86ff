"""A pair of gloo processes that runs ``on_each_process(rank, world)`` of several test modules
in one process group, so a session starts the processes once (tests/methods/conftest.py).

A module of its own (not the conftest) so that the spawned processes find the worker by a
name no other folder's conftest shares."""
import importlib
import os
import socket
from pathlib import Path
from typing import Dict, List, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmark.dist import free_groups

# The modules whose ``on_each_process`` the pair runs (tests/methods/conftest.py and
# tests/evaluation/conftest.py share the pair under one name).
TWO_PROCESS_MODULES = ('tests.methods.test_distributed', 'tests.methods.test_sync_bn',
                       'tests.methods.test_simclr_authors', 'tests.methods.test_key_shuffle_bn',
                       'tests.evaluation.test_features',
                       'tests.evaluation.test_supervised_protocol')


def worker(rank: int, world: int, port: int, out_dir: str, modules: Sequence[str]) -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=world)
    torch.set_num_threads(1)
    for name in modules:
        result = importlib.import_module(name).on_each_process(rank, world)
        torch.save(result, os.path.join(out_dir, f'{name}.rank{rank}.pt'))
        dist.barrier()
    dist.destroy_process_group()
    free_groups()  # what still holds the group, freed before the interpreter's shutdown


def run_on_two_processes(modules: Sequence[str], out_dir: Path) -> Dict[str, List[dict]]:
    """{module: [rank 0's result, rank 1's]} of ``on_each_process`` of every module."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    mp.start_processes(worker, args=(2, port, str(out_dir), tuple(modules)), nprocs=2,
                       start_method='spawn')
    return {name: [torch.load(out_dir / f'{name}.rank{r}.pt') for r in range(2)]
            for name in modules}
