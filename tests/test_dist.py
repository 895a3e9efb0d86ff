"""benchmark.dist: one process reads torchrun's environment; two gloo processes agree."""
import os

import pytest
import torch.distributed as torch_dist
import torch.multiprocessing as mp
from torch import nn

from benchmark import dist


@pytest.fixture(autouse=True)
def no_process_group():
    assert not torch_dist.is_initialized()


@pytest.mark.parametrize('env,rank,main', [({}, 0, True), ({'RANK': '0'}, 0, True),
                                           ({'RANK': '3'}, 3, False)])
def test_rank_and_main_come_from_the_environment(monkeypatch, env, rank, main):
    monkeypatch.delenv('RANK', raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert dist.rank() == rank
    assert dist.is_main() is main


def test_local_rank(monkeypatch):
    monkeypatch.delenv('LOCAL_RANK', raising=False)
    assert dist.local_rank() == 0
    monkeypatch.setenv('LOCAL_RANK', '2')
    assert dist.local_rank() == 2


def test_one_process_any_process_is_the_flag_and_collectives_are_no_ops():
    assert dist.distributed() is False
    assert dist.any_process(True) is True
    assert dist.any_process(False) is False
    dist.barrier()
    dist.leave_together()  # no group: nothing to wait for or close
    assert not torch_dist.is_initialized()


def test_unwrap_returns_the_inner_module():
    inner = nn.Linear(2, 2)

    class Wrapper(nn.Module):  # what DDP and mmengine's wrappers look like: `.module`
        def __init__(self):
            super().__init__()
            self.module = inner

    assert dist.unwrap(Wrapper()) is inner
    assert dist.unwrap(inner) is inner


def _worker(rank: int, world: int, port: int, flags: tuple, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK='9')
    torch_dist.init_process_group('gloo', rank=rank, world_size=world)
    seen = [dist.rank(), int(dist.distributed()), int(dist.is_main())]
    seen += [int(dist.any_process(flag)) for flag in flags[rank]]
    with open(os.path.join(out_dir, f'rank{rank}.txt'), 'w') as handle:
        handle.write(' '.join(map(str, seen)))
    dist.leave_together()
    assert not torch_dist.is_initialized()


@pytest.mark.slow
def test_two_processes_any_process_is_true_everywhere_if_true_anywhere(tmp_path, free_port):
    """Rank 0 / rank 1 flags: (F, F) -> F, (T, F) -> T, (F, T) -> T, (T, T) -> T on both."""
    flags = ((False, True, False, True), (False, False, True, True))
    mp.start_processes(_worker, args=(2, free_port, flags, str(tmp_path)), nprocs=2,
                       start_method='spawn')
    results = [(tmp_path / f'rank{r}.txt').read_text().split() for r in range(2)]
    # the process group's rank wins over the RANK variable (set to 9 in both)
    assert results[0] == ['0', '1', '1', '0', '1', '1', '1']
    assert results[1] == ['1', '1', '0', '0', '1', '1', '1']
