"""methods/sync_bn.py: plain BatchNorm in one process; two gloo processes = one process on the
concatenated batch (outputs, input and parameter gradients, running statistics)."""
import copy

import pytest
import torch
import torch.distributed as dist
from torch import nn

from methods.sync_bn import SyncBatchNorm, convert_sync_bn

N_LOCAL = 3  # rows per process; odd, so no accidental symmetry between halves


def small_net(momentum=0.1) -> nn.Module:
    """conv -> BN2d -> ReLU -> conv -> BN2d -> pool -> BN1d, float64, fixed weights."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=momentum),
                        nn.ReLU(), nn.Conv2d(4, 5, 3), nn.BatchNorm2d(5, momentum=momentum),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.BatchNorm1d(5, momentum=momentum))
    with torch.no_grad():  # non-trivial affine parameters
        for m in net.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return net.double()


def data(rows: int):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(rows, 2, 6, 6, generator=gen, dtype=torch.float64) * 2 + 0.3
    w = torch.randn(rows, 5, generator=gen, dtype=torch.float64)  # loss weights
    return x, w


def step(net: nn.Module, x: torch.Tensor, w: torch.Tensor, passes: int = 2) -> dict:
    """`passes` training forwards (running stats move each time), then sum(w * out).backward()."""
    x = x.clone().requires_grad_()
    for _ in range(passes):
        out = net(x)
    (w * out).sum().backward()
    bns = [m for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    return dict(out=out.detach(), x_grad=x.grad,
                grads={k: p.grad.clone() for k, p in net.named_parameters()},
                stats=[(m.running_mean.clone(), m.running_var.clone(),
                        int(m.num_batches_tracked)) for m in bns])


def assert_same(got: dict, want: dict, atol=1e-10) -> None:
    for key in ('out', 'x_grad'):
        torch.testing.assert_close(got[key], want[key], atol=atol, rtol=0)
    for k in want['grads']:
        torch.testing.assert_close(got['grads'][k], want['grads'][k], atol=atol, rtol=0)
    for (m1, v1, n1), (m2, v2, n2) in zip(got['stats'], want['stats']):
        torch.testing.assert_close(m1, m2, atol=atol, rtol=0)
        torch.testing.assert_close(v1, v2, atol=atol, rtol=0)
        assert n1 == n2


@pytest.mark.parametrize('momentum', [0.1, None])
def test_one_process_is_plain_batch_norm(momentum):
    """Without a process group: same outputs, gradients and running stats as BatchNorm."""
    plain = small_net(momentum)
    synced = convert_sync_bn(copy.deepcopy(plain))
    assert sum(isinstance(m, SyncBatchNorm) for m in synced.modules()) == 3
    x, w = data(2 * N_LOCAL)
    assert_same(step(synced, x, w), step(plain, x, w), atol=0)
    plain.eval(), synced.eval()
    torch.testing.assert_close(synced(x), plain(x), atol=0, rtol=0)


def test_torch_gpu_path_runs_on_this_module():
    """The GPU branch (torch's nn.SyncBatchNorm.forward on this module's state) works; without a
    process group it is BatchNorm, which a CPU tensor can check: same output and stats."""
    plain = nn.BatchNorm2d(4, momentum=None).double()
    synced = convert_sync_bn(copy.deepcopy(plain))
    x = data(2 * N_LOCAL)[0].repeat(1, 2, 1, 1)  # (6, 4, 6, 6)
    for _ in range(2):
        torch.testing.assert_close(synced._torch_sync_forward(x), plain(x), atol=0, rtol=0)
    torch.testing.assert_close(synced.running_var, plain.running_var, atol=0, rtol=0)


def test_convert_shares_tensors_and_keeps_state_dict_keys():
    """Parameters are the same objects; state_dict keys match, so checkpoints stay loadable."""
    plain = small_net()
    weight = plain[1].weight
    synced = convert_sync_bn(plain)
    assert synced[1].weight is weight and isinstance(synced[1], SyncBatchNorm)
    assert list(synced.state_dict()) == list(small_net().state_dict())


def on_each_process(rank: int, world: int) -> dict:
    """Run by each of two gloo processes (tests/methods/conftest.py)."""
    x, w = data(world * N_LOCAL)
    rows = slice(rank * N_LOCAL, (rank + 1) * N_LOCAL)
    res = step(convert_sync_bn(small_net()), x[rows], w[rows])
    for g in res['grads'].values():  # the sum over processes: d(sum of all losses)
        dist.all_reduce(g)
    plain = step(small_net(), x[rows], w[rows])  # unsynchronised, to show sync matters
    return dict(res, plain_out=plain['out'])


@pytest.fixture
def two_processes(two_process_results):
    return two_process_results['tests.methods.test_sync_bn']


def test_two_processes_equal_one_process_on_the_concatenated_batch(two_processes):
    """Rows of the output and of the input gradient, parameter gradients, running stats."""
    x, w = data(2 * N_LOCAL)
    want = step(small_net(), x, w)
    for rank, res in enumerate(two_processes):
        rows = slice(rank * N_LOCAL, (rank + 1) * N_LOCAL)
        assert_same(dict(res, out=res['out'], x_grad=res['x_grad']),
                    dict(want, out=want['out'][rows], x_grad=want['x_grad'][rows]))
        # Local statistics would give other outputs: the comparison can fail.
        assert (res['plain_out'] - want['out'][rows]).abs().max() > 1e-3
