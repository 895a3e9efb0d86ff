"""One pair of gloo processes runs every two-process check of the method tests.

Each module named in `TWO_PROCESS_MODULES` defines ``on_each_process(rank, world) -> dict``; the
pair imports it, runs it in its process group (one module after the other) and hands the two
results back, so the session starts processes once rather than once per module."""
import importlib
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TWO_PROCESS_MODULES = ('tests.methods.test_distributed', 'tests.methods.test_sync_bn',
                       'tests.methods.test_simclr_authors')


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=world)
    torch.set_num_threads(1)
    for name in TWO_PROCESS_MODULES:
        result = importlib.import_module(name).on_each_process(rank, world)
        torch.save(result, os.path.join(out_dir, f'{name}.rank{rank}.pt'))
        dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope='session')
def two_process_results(tmp_path_factory) -> dict:
    """{module name: [rank 0's result, rank 1's]} of every `TWO_PROCESS_MODULES` module."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    out = tmp_path_factory.mktemp('two_processes')
    mp.start_processes(_worker, args=(2, port, str(out)), nprocs=2, start_method='spawn')
    return {name: [torch.load(out / f'{name}.rank{r}.pt') for r in range(2)]
            for name in TWO_PROCESS_MODULES}
