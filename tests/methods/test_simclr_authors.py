"""SimCLR and MixCo-SimCLR from the paper configs vs a naive float64 copy of the authors' step.

The reference follows Lee-Gihun/MixCo-Mixup-Contrast simclr/ (pretrain.py `_step`/`_mix_step`,
models/resnet_simclr.py, loss/nt_xent.py, loss/mix_loss.py), written independently: a plain
torchvision ResNet (plain BatchNorm), the head Linear -> ReLU -> Linear by hand, NT-Xent as a loop
over its 2N rows, each view's mix loss as a loop, the passes a, b, mixed a, mixed b each their own.
"""
import functools
from pathlib import Path

import pytest
import torch
import torchvision
from mmengine.config import Config
from mmengine.registry import MODELS

import methods  # noqa: F401  registers the models
import methods.mixco
from methods.sync_bn import SyncBatchNorm

ROOT = Path(__file__).resolve().parents[2]
B, SIZE = 8, 16  # per-step batch and image side: the only things shrunk
F64 = dict(dtype=torch.float64)
LAMS = [torch.tensor([0.9, 0.2, 0.55, 0.0], **F64), torch.tensor([0.35, 1.0, 0.7, 0.15], **F64)]


def from_config(name: str, **changes) -> torch.nn.Module:
    """The model of configs/<name> as it stands (plus `changes`), float64, training mode."""
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    cfg.model.update(changes)
    torch.manual_seed(0)
    return MODELS.build(cfg.model).double().train()


def pin_lambdas(monkeypatch, lams) -> None:
    """The config's own Mixer, drawing `lams` in order instead of U(0, 1)."""
    queue = list(lams)
    monkeypatch.setattr(methods.mixco, 'sample_lambda', lambda m, device, *a: queue.pop(0))


def images(rows: int = B, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(rows, 3, SIZE, SIZE, generator=gen, dtype=torch.float64) for _ in 'ab']


# ------------------------------------------------------------------------- naive reference
class Authors:
    """The authors' ResNetSimCLR with the weights of `model`, plain BatchNorm, head by hand."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.net = torchvision.models.resnet18()
        self.net.fc = torch.nn.Identity()
        state = {k[len('backbone.'):]: v for k, v in model.state_dict().items()
                 if k.startswith('backbone.')}
        self.net.load_state_dict(state)
        self.net.double().train()
        lin1, lin2 = model.projection_head.layers[0], model.projection_head.layers[2]
        self.head = [t.detach().clone().requires_grad_() for t in
                     (lin1.weight, lin1.bias, lin2.weight, lin2.bias)]

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """One forward pass: features, then relu(h W1^T + b1) W2^T + b2, L2-normalised."""
        w1, b1, w2, b2 = self.head
        z = torch.relu(self.net(x) @ w1.t() + b1) @ w2.t() + b2
        return z / z.pow(2).sum(1, keepdim=True).sqrt()

    def grads(self) -> dict:
        """Gradients under the model's parameter names."""
        out = {f'backbone.{k}': p.grad for k, p in self.net.named_parameters()}
        names = ('layers.0.weight', 'layers.0.bias', 'layers.2.weight', 'layers.2.bias')
        out.update({f'projection_head.{n}': t.grad for n, t in zip(names, self.head)})
        return out


def nt_xent(z_i, z_j, tau):
    """loss/nt_xent.py: rows of cat(z_j, z_i); positive at distance N; sum of CE / 2N."""
    reps = torch.cat([z_j, z_i])
    n2, n = reps.shape[0], z_i.shape[0]
    total = 0
    for r in range(n2):
        sims = [reps[r] @ reps[c] / tau for c in range(n2)]
        pos = sims[(r + n) % n2]
        others = [s for c, s in enumerate(sims) if c != r]  # positive + 2N - 2 negatives
        total = total - (pos - torch.log(sum(torch.exp(s) for s in others)))
    return total / n2


def mix_loss(z_mix, z_other, lam, tau_mix):
    """loss/mix_loss.py on logits z_mix z_other^T / tau_mix, targets diag(lam) | diag(1 - lam)."""
    m = z_mix.shape[0]
    total = 0
    for i in range(m):
        logits = [z_mix[i] @ z_other[j] / tau_mix for j in range(2 * m)]
        log_z = torch.log(sum(torch.exp(v) for v in logits))
        total = total - (lam[i] * (logits[i] - log_z) + (1 - lam[i]) * (logits[m + i] - log_z))
    return total / m


def mixed(x, lam):
    m = x.shape[0] // 2
    return torch.stack([lam[i] * x[i] + (1 - lam[i]) * x[m + i] for i in range(m)])


def authors_losses(ref: Authors, xs, lams, tau=0.5, tau_mix=None):
    """(NT-Xent, sum of the halved mix losses) of `_step` + `_mix_step`; passes a, b, mix a, mix b.

    `xs` is a list of per-process (x_a, x_b); each pass runs once over all processes' rows
    (BatchNorm over every process = sync-BN) and each process's loss uses its own rows.
    Returns per-process loss pairs.
    """
    def one_pass(batches):
        z = ref.project(torch.cat(batches))
        return z.split([b.shape[0] for b in batches])

    z_a = one_pass([x[0] for x in xs])
    z_b = one_pass([x[1] for x in xs])
    out = []
    zm_a = one_pass([mixed(x[0], lam[0]) for x, lam in zip(xs, lams)]) if tau_mix else None
    zm_b = one_pass([mixed(x[1], lam[1]) for x, lam in zip(xs, lams)]) if tau_mix else None
    for r in range(len(xs)):
        inst = nt_xent(z_a[r], z_b[r], tau)
        mix = 0
        if tau_mix:  # for (xis, zjs), (xjs, zis): loss += crit(...) / 2
            mix = (mix_loss(zm_a[r], z_b[r], lams[r][0], tau_mix) / 2
                   + mix_loss(zm_b[r], z_a[r], lams[r][1], tau_mix) / 2)
        out.append((inst, mix))
    return out


# ------------------------------------------------------------------------- one process
def max_grad_diff(model, ref) -> float:
    want = ref.grads()
    assert set(want) == {k for k, p in model.named_parameters()}
    return max((p.grad - want[k]).abs().max().item() for k, p in model.named_parameters())


@functools.lru_cache(maxsize=None)
def one_step(config: str) -> dict:
    """One training step of the config's model and of the reference, on the same inputs."""
    model = from_config(config)
    ref = Authors(model)
    with pytest.MonkeyPatch.context() as patch:
        pin_lambdas(patch, LAMS)
        x_a, x_b = images()
        losses = model([x_a, x_b], mode='loss')
    sum(v for k, v in losses.items() if 'loss' in k).backward()
    tau_mix = 0.5 if 'mixco' in config else None
    ((inst, mix),) = authors_losses(ref, [(x_a, x_b)], [LAMS], tau_mix=tau_mix)
    (inst + mix).backward()
    return dict(config=config, model=model, ref=ref, losses=losses, inst=inst, mix=mix)


@pytest.mark.parametrize('config', ['simclr_r18_tiny.py', 'mixco_simclr_r18_tiny.py'])
def test_config_model_equals_the_authors_step(config):
    """Loss terms, every parameter gradient and BN running stats to 1e-6 (float64)."""
    step = one_step(config)
    model, ref, losses = step['model'], step['ref'], step['losses']
    assert abs(losses['loss_inst'].item() - step['inst'].item()) < 1e-6
    if 'mixco' in config:
        assert abs(losses['loss_mix'].item() - step['mix'].item()) < 1e-6
        assert step['mix'].item() > 0.1  # the mixed term is really there
    assert max_grad_diff(model, ref) < 1e-6
    # Four (or two) training passes each moved the running stats: order and count agree.
    torch.testing.assert_close(model.backbone.layer4[1].bn2.running_var,
                               ref.net.layer4[1].bn2.running_var, atol=1e-9, rtol=0)


@pytest.mark.parametrize('changes', [dict(joint_forward=True), dict(mix_joint_forward=True)])
def test_one_joint_pass_is_not_the_authors_step(changes, monkeypatch):
    """The reference tells the pass grouping apart (the comparison above can fail)."""
    want = one_step('mixco_simclr_r18_tiny.py')['mix'].item()
    model = from_config('mixco_simclr_r18_tiny.py', **changes)
    pin_lambdas(monkeypatch, LAMS)
    with torch.no_grad():
        losses = model(images(), mode='loss')
    assert abs(losses['loss_mix'].item() - want) > 1e-4


def test_lightly_options_build_lightlys_simclr():
    """Flipping the four options gives lightly's head (with BN) and the gathered NT-Xent."""
    model = from_config('simclr_r18_tiny.py', joint_forward=True, head_batch_norm=True,
                        gather_negatives=True, sync_bn=False)
    assert model.criterion.gather_distributed and model.joint_forward
    assert sum(isinstance(m, torch.nn.BatchNorm1d) for m in model.projection_head.modules()) == 2
    assert not any(isinstance(m, SyncBatchNorm) for m in model.modules())
    authors = from_config('simclr_r18_tiny.py')
    assert not authors.criterion.gather_distributed
    assert all(isinstance(m, SyncBatchNorm) for m in authors.backbone.modules()
               if isinstance(m, torch.nn.modules.batchnorm._BatchNorm))


# ------------------------------------------------------------------------- two processes
def on_each_process(rank: int, world: int) -> dict:
    """Run by each of two gloo processes (tests/methods/conftest.py)."""
    import torch.distributed as dist
    model = from_config('mixco_simclr_r18_tiny.py')
    queue = list(LAMS_2P[rank])
    methods.mixco.sample_lambda = lambda m, device, *a: queue.pop(0)
    x_a, x_b = (x[rank * B_2P:(rank + 1) * B_2P] for x in images(world * B_2P))
    losses = model([x_a, x_b], mode='loss')
    (losses['loss_inst'] + losses['loss_mix']).backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    for g in grads.values():  # DDP: the mean over processes
        dist.all_reduce(g)
        g /= world
    return dict(inst=losses['loss_inst'].detach(), mix=losses['loss_mix'].detach(),
                grads=grads, running_var=model.backbone.layer4[1].bn2.running_var)


B_2P = 4  # rows per process
LAMS_2P = [[torch.tensor([0.9, 0.2], **F64), torch.tensor([0.35, 1.0], **F64)],  # rank 0: a, b
           [torch.tensor([0.55, 0.0], **F64), torch.tensor([0.7, 0.15], **F64)]]


@pytest.fixture
def two_processes(two_process_results):
    return two_process_results['tests.methods.test_simclr_authors']


def test_two_processes_sync_bn_local_negatives(two_processes):
    """Each process's loss = the authors' on its own rows with BN statistics over both
    processes; DDP's mean gradient and the running stats = the reference's."""
    model = from_config('mixco_simclr_r18_tiny.py')
    ref = Authors(model)
    x_a, x_b = images(2 * B_2P)
    xs = [(x_a[r * B_2P:(r + 1) * B_2P], x_b[r * B_2P:(r + 1) * B_2P]) for r in range(2)]
    per_rank = authors_losses(ref, xs, LAMS_2P, tau_mix=0.5)
    sum(inst + mix for inst, mix in per_rank).div(2).backward()
    want = ref.grads()
    for res, (inst, mix) in zip(two_processes, per_rank):
        assert abs(res['inst'].item() - inst.item()) < 1e-6
        assert abs(res['mix'].item() - mix.item()) < 1e-6
        assert max((res['grads'][k] - want[k]).abs().max().item() for k in want) < 1e-6
        torch.testing.assert_close(res['running_var'], ref.net.layer4[1].bn2.running_var,
                                   atol=1e-9, rtol=0)
    assert abs(per_rank[0][0].item() - per_rank[1][0].item()) > 1e-3  # the ranks differ
