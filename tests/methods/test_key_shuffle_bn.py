"""Shuffle-BN of the MoCo family's key encoder (methods/moco.py): one process with `bn_splits`
BatchNorm groups computes what two gloo processes with the cross-process shuffle compute."""
import copy
from types import SimpleNamespace

import pytest
import torch
from mmengine.config import Config
from torch import nn

import methods.base
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.run_info import RunInfoHook
from benchmark.layout import REPO_ROOT
from benchmark.names import METHOD_NAMES
from methods import MoCo, SimCLR
from methods.moco import forward_in_groups
from methods.sync_bn import convert_sync_bn
from tests.conftest import tiny_backbone

N_LOCAL, PERM_SEED = 4, 11
# Every method of benchmark/names.py METHODS built on MoCo (its key encoder, its shuffle-BN).
FAMILY = tuple(cls for cls in (getattr(methods, kind, None) for kind in METHOD_NAMES)
               if isinstance(cls, type) and issubclass(cls, MoCo))


def build(cls=MoCo, **kwargs) -> MoCo:
    """A float64 model on the tiny backbone, BatchNorm in the head too, in training mode.

    The query encoder gets SyncBatchNorm (plain BatchNorm in one process), so that the queries,
    and with them the loss, do not depend on how the batch is spread over processes; the key
    encoder keeps plain BatchNorm, as in training."""
    original, methods.base.build_resnet = methods.base.build_resnet, tiny_backbone
    try:
        torch.manual_seed(0)
        model = cls(feature_dim=8, queue_size=16, key_momentum=0.9, head_batch_norm=True,
                    **kwargs).double()
    finally:
        methods.base.build_resnet = original
    convert_sync_bn(model.backbone)
    convert_sync_bn(model.projection_head)
    return model.train()


def images(b: int = 2 * N_LOCAL):
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(b, 3, 8, 8, generator=gen, dtype=torch.float64) for _ in range(2)]


def key_batch_norms(model: MoCo):
    return [m for part in (model.backbone_momentum, model.projection_head_momentum)
            for m in part.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def step(model: MoCo, x_q, x_k) -> dict:
    """One training step's loss, keys, queue and key-encoder running statistics; the
    permutation is drawn right after seeding (in two processes, rank 0's is used)."""
    keys, embed_keys = [], model.embed_keys
    model.embed_keys = lambda x: keys.append(embed_keys(x)) or keys[-1]
    torch.manual_seed(PERM_SEED)
    loss = model([x_q, x_k], mode='loss')['loss_inst'].detach()
    layers = key_batch_norms(model)
    return dict(loss=loss, keys=keys[0], queue=model.queue.clone(), ptr=int(model.queue_ptr),
                means=[m.running_mean.clone() for m in layers],
                vars=[m.running_var.clone() for m in layers],
                counts=[int(m.num_batches_tracked) for m in layers])


def on_each_process(rank: int, world: int) -> dict:
    """Run by each of two gloo processes (tests/methods/conftest.py): half of the batch each,
    the default shuffle_bn='auto' (the shuffle across processes)."""
    model = build()
    rows = slice(rank * N_LOCAL, (rank + 1) * N_LOCAL)
    x_q, x_k = images()
    result = step(model, x_q[rows], x_k[rows])
    return dict(result, regime=model.key_batch_norm())


@pytest.fixture
def two_process_results(two_process_results):
    return two_process_results['tests.methods.test_key_shuffle_bn']


# ----------------------------------------------------------------------------- two processes
def test_one_process_split_bn_equals_two_processes_with_the_shuffle(two_process_results):
    """The same permutation: keys to round-off, the loss (the mean of the processes' losses),
    the queue after the step, and the key encoder's running statistics (the mean of the two
    processes' own)."""
    model = build()
    assert model.key_batch_norm() == 'split into 2 groups (one process)'
    got = step(model, *images())
    ranks = two_process_results
    assert [r['regime'] for r in ranks] == ['shuffle across 2 processes'] * 2
    tol = dict(atol=1e-10, rtol=0)
    torch.testing.assert_close(got['keys'], torch.cat([r['keys'] for r in ranks]), **tol)
    torch.testing.assert_close(got['loss'], (ranks[0]['loss'] + ranks[1]['loss']) / 2, **tol)
    for res in ranks:
        torch.testing.assert_close(res['queue'], got['queue'], **tol)
        assert res['ptr'] == got['ptr'] == 2 * N_LOCAL
        assert res['counts'] == got['counts'] == [1] * len(got['counts'])
    for name in ('means', 'vars'):
        for i, value in enumerate(got[name]):
            torch.testing.assert_close(value, (ranks[0][name][i] + ranks[1][name][i]) / 2, **tol)


def test_the_comparison_tells_the_regimes_apart(two_process_results):
    """BN over the whole key batch ('off'), or groups of another permutation, give other keys:
    the equality above needs the groups and the permutation of the two-process run."""
    want = torch.cat([r['keys'] for r in two_process_results])
    off = step(build(shuffle_bn='off'), *images())['keys']
    assert (off - want).abs().max() > 1e-3
    torch.manual_seed(PERM_SEED + 1)
    other = build().embed_keys(images()[1])
    assert (other - want).abs().max() > 1e-3


# ----------------------------------------------------------------------------- one process
def test_off_is_the_plain_key_forward_and_draws_no_random_number():
    """shuffle_bn='off' in one process: BN over the key batch itself, as before the split."""
    model = build(shuffle_bn='off')
    reference = copy.deepcopy(model)
    x_k = images()[1]
    state = torch.random.get_rng_state()
    keys = model.embed_keys(x_k)
    assert torch.equal(torch.random.get_rng_state(), state)
    with torch.no_grad():
        for key, query in zip(reference.momentum_parameters(),
                              [*reference.backbone.parameters(),
                               *reference.projection_head.parameters()]):
            key.mul_(0.9).add_(query, alpha=0.1)
        want = reference.projection_head_momentum(reference.backbone_momentum(x_k))
    torch.testing.assert_close(keys, nn.functional.normalize(want, dim=1), atol=1e-12, rtol=0)
    assert model.key_batch_norm() == 'none'


@pytest.mark.parametrize('momentum', [0.1, None])
def test_forward_in_groups_is_each_group_on_its_own(momentum):
    """Outputs = each slice through its own copy of the encoder; running statistics = the mean
    of the copies', one batch counted (also with momentum=None, the cumulative average)."""
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=momentum),
                            nn.Flatten(), nn.Linear(4 * 36, 5), nn.BatchNorm1d(5,
                                                                             momentum=momentum))
    encoder.double().train()
    x = torch.randn(9, 3, 8, 8, dtype=torch.float64)
    copies = [copy.deepcopy(encoder) for _ in range(3)]
    out = forward_in_groups([encoder[:2], encoder[2:]], x, 3)
    want = torch.cat([c(chunk) for c, chunk in zip(copies, x.chunk(3))])
    torch.testing.assert_close(out, want, atol=1e-12, rtol=0)
    for i in (1, 4):
        layers = [c[i] for c in copies]
        torch.testing.assert_close(encoder[i].running_mean,
                                   sum(m.running_mean for m in layers) / 3, atol=1e-12, rtol=0)
        torch.testing.assert_close(encoder[i].running_var,
                                   sum(m.running_var for m in layers) / 3, atol=1e-12, rtol=0)
        assert int(encoder[i].num_batches_tracked) == 1


@pytest.mark.parametrize('cls', FAMILY, ids=lambda cls: cls.__name__)
def test_every_family_member_splits_its_keys_in_one_process(cls):
    """The family's models take the keys from MoCo.embed_keys: the default splits in one
    process; a batch that bn_splits does not divide is one clear line."""
    model = build(cls, bn_splits=4)
    assert model.key_batch_norm() == 'split into 4 groups (one process)'
    assert model.key_batch_norm(world_size=4) == 'shuffle across 4 processes'
    x_q, x_k = images(b=8)
    model([x_q, x_k], mode='loss')
    with pytest.raises(ValueError) as err:
        model.embed_keys(x_k[:6])
    assert str(err.value) == ('model.bn_splits=4 must divide the key batch, got 6 images; use a '
                              'batch divisible by 4 (and drop_last=True)')


def test_eval_mode_draws_no_permutation():
    """In eval mode BN uses running statistics: no permutation, the keys of a plain forward."""
    model = build().eval()
    reference = build(shuffle_bn='off').eval()
    state = torch.random.get_rng_state()
    keys = model.embed_keys(images()[1])
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.testing.assert_close(keys, reference.embed_keys(images()[1]), atol=1e-12, rtol=0)


def test_split_across_several_processes_and_bad_options():
    model = build(shuffle_bn='split', bn_splits=2)
    assert model.key_batch_norm(world_size=4) == 'split into 2 groups (on each of 4 processes)'
    assert build(shuffle_bn='off').key_batch_norm(world_size=4) == 'none'
    with pytest.raises(ValueError, match='shuffle_bn'):
        build(shuffle_bn='across')
    with pytest.raises(ValueError, match='bn_splits'):
        build(bn_splits=0)


# ----------------------------------------------------------------------------- config and record
def load(name: str) -> Config:
    return Config.fromfile(str(REPO_ROOT / 'configs' / name))


@pytest.mark.parametrize('world_size, options, error', [
    (1, {'train_dataloader.batch_size': 7}, "model.shuffle_bn='auto'"),
    (2, {'train_dataloader.batch_size': 7}, None),  # shuffled across the processes
    (2, {'train_dataloader.batch_size': 7, 'model.shuffle_bn': 'split'}, "'split'"),
    (1, {'train_dataloader.batch_size': 7, 'model.shuffle_bn': 'off'}, None),
    (1, {'model.bn_splits': 3}, 'model.bn_splits (3)'),
    (1, {'model.bn_splits': 4}, None),
])
def test_config_check_wants_a_batch_the_groups_divide(world_size, options, error):
    """Checked before any data is read, in one line naming both keys."""
    for name in ('mocov2_r18_tiny.py', 'imix_r18_tiny.py', 'mochi_r18_tiny.py'):
        cfg = load(name)
        cfg.merge_from_dict(options)
        if error is None:
            validate_config(cfg, world_size=world_size)
            continue
        with pytest.raises(ConfigError) as err:
            validate_config(cfg, world_size=world_size)
        message = str(err.value)
        assert '\n' not in message and error in message, message
        assert message.startswith('train_dataloader.batch_size (') and 'model.bn_splits' in message


@pytest.mark.parametrize('options, where', [({'model.shuffle_bn': 'across'}, 'model.shuffle_bn'),
                                            ({'model.bn_splits': 0}, 'model.bn_splits')])
def test_config_check_refuses_bad_values(options, where):
    cfg = load('mocov2_r18_tiny.py')
    cfg.merge_from_dict(options)
    with pytest.raises(ConfigError, match=where):
        validate_config(cfg, world_size=1)


def test_run_info_states_the_key_bn_regime(tiny_backbones):
    """Checkpoint meta, and from it the record's extra, say which regime the run used; models
    without a key encoder say nothing."""
    def info(model, world_size):
        runner = SimpleNamespace(world_size=world_size, model=model,
                                 train_dataloader=SimpleNamespace(batch_size=8))
        return RunInfoHook().info(runner)
    model = build()
    assert info(model, 1)['key_bn'] == 'split into 2 groups (one process)'
    assert info(model, 2)['key_bn'] == 'shuffle across 2 processes'
    assert info(build(shuffle_bn='off'), 1)['key_bn'] == 'none'
    wrapped = SimpleNamespace(module=model)  # as DDP holds it
    assert info(wrapped, 2)['key_bn'] == 'shuffle across 2 processes'
    assert 'key_bn' not in info(SimCLR(), 1)
