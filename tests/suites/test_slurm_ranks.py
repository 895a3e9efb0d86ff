"""One SLURM task per process: each rank's environment from SLURM's, and the rendezvous that the
task of rank 0 hosts and the others read (their wait bounded)."""
import json
from types import SimpleNamespace

import pytest

from benchmark.suites.slurm_ranks import RENDEZVOUS_FILE, rank_env, rendezvous


def job(rank, tasks=4, nodes=2):
    return SimpleNamespace(global_rank=rank, local_rank=rank % (tasks // nodes),
                           num_tasks=tasks, num_nodes=nodes, node=rank // (tasks // nodes),
                           hostnames=['localhost', 'node2'])


def test_each_rank_gets_its_place_and_the_store():
    assert rank_env(job(3), 'localhost', 4567) == dict(
        RANK='3', LOCAL_RANK='1', WORLD_SIZE='4', LOCAL_WORLD_SIZE='2', GROUP_RANK='1',
        MASTER_ADDR='localhost', MASTER_PORT='4567', TORCHELASTIC_USE_AGENT_STORE='True',
        TRAIN_HOLD_SIGNALS='1')


def test_rank_0_hosts_and_the_others_read_this_attempts_line(tmp_path, monkeypatch):
    monkeypatch.setenv('SLURM_JOB_ID', '77')
    monkeypatch.setenv('SLURM_RESTART_COUNT', '2')
    store, addr, port = rendezvous(str(tmp_path), job(0))
    try:
        assert store.port == port > 0 and addr == 'localhost'
        assert json.loads((tmp_path / RENDEZVOUS_FILE).read_text()) == dict(
            attempt='77.2', addr='localhost', port=port)
        assert rendezvous(str(tmp_path), job(1), wait_s=1) == (None, 'localhost', port)
        monkeypatch.setenv('SLURM_RESTART_COUNT', '3')  # requeued: last attempt's line is stale
        with pytest.raises(RuntimeError, match=r'rank 2: the task of rank 0 did not say where '
                                               r'it hosts the rendezvous within 0 s'):
            rendezvous(str(tmp_path), job(2), wait_s=0.3)
    finally:
        del store
