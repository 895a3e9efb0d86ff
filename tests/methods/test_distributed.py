"""Two gloo processes against one process on the concatenated batch, for every collective."""
import pytest
import torch
import torch.distributed as dist

from methods import MoCo
from methods.simclr import NTXent

N_LOCAL, DIM = 4, 8


def full_batch(seed: int = 0):
    """Inputs (2 x N_LOCAL rows per view) and a linear projection shared by every process."""
    gen = torch.Generator().manual_seed(seed)
    x_a = torch.randn(2 * N_LOCAL, DIM, generator=gen, dtype=torch.float64)
    x_b = torch.randn(2 * N_LOCAL, DIM, generator=gen, dtype=torch.float64)
    weight = torch.randn(DIM, DIM, generator=gen, dtype=torch.float64)
    return x_a, x_b, weight


def ntxent_step(x_a, x_b, weight):
    """NT-Xent loss and the gradient of the projection, as DDP would average it."""
    weight = weight.clone().requires_grad_(True)
    loss = NTXent(temperature=0.5, gather_distributed=True)(x_a @ weight, x_b @ weight)
    loss.backward()
    grad = weight.grad.clone()
    if dist.is_initialized():  # DDP averages gradients over processes
        dist.all_reduce(grad)
        grad /= dist.get_world_size()
        loss = loss.detach().clone()
        dist.all_reduce(loss)
        loss /= dist.get_world_size()
    return loss.detach(), grad


def small_moco() -> MoCo:
    torch.manual_seed(0)
    return MoCo(backbone=dict(depth=18, small_stem=True), queue_size=12, feature_dim=DIM).eval()


def on_each_process(rank: int, world: int) -> dict:
    """Run by each of two gloo processes (tests/methods/conftest.py)."""
    torch.manual_seed(100 + rank)  # processes draw different shuffles, as in a real run
    rows = slice(rank * N_LOCAL, (rank + 1) * N_LOCAL)
    x_a, x_b, weight = full_batch()
    loss, grad = ntxent_step(x_a[rows], x_b[rows], weight)
    model = small_moco()
    images = torch.randn(2 * N_LOCAL, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    keys = model.embed_keys(images[rows])  # shuffle-BN across the two processes
    model.enqueue(keys)
    return dict(loss=loss, grad=grad, keys=keys, queue=model.queue, ptr=model.queue_ptr)


@pytest.fixture
def two_process_results(two_process_results):
    return two_process_results['tests.methods.test_distributed']


def test_ntxent_gather_loss_and_gradients_match_one_process(two_process_results):
    """The NT-Xent's gather: 2 x 4 rows give the loss and gradient of 8 rows in one process."""
    loss, grad = ntxent_step(*full_batch())
    for res in two_process_results:
        torch.testing.assert_close(res['loss'], loss, atol=1e-5, rtol=0)
        torch.testing.assert_close(res['grad'], grad, atol=1e-5, rtol=0)


def test_shuffle_bn_keys_come_back_in_order(two_process_results):
    """batch_shuffle/unshuffle across processes returns each process's own keys in order."""
    model = small_moco()  # eval mode: BN uses running stats, so keys don't depend on the batch
    images = torch.randn(2 * N_LOCAL, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    keys = model.embed_keys(images)
    got = torch.cat([r['keys'] for r in two_process_results])
    torch.testing.assert_close(got, keys, atol=1e-5, rtol=0)


def test_enqueue_gathers_keys_of_every_process(two_process_results):
    """Both processes enqueue all 8 keys, in rank order, like one process with the full batch."""
    model = small_moco()
    images = torch.randn(2 * N_LOCAL, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    model.enqueue(model.embed_keys(images))
    for res in two_process_results:
        torch.testing.assert_close(res['queue'], model.queue, atol=1e-5, rtol=0)
        assert int(res['ptr']) == int(model.queue_ptr) == 8
