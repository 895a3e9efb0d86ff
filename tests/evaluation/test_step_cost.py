"""benchmark.evaluation.step_cost: FLOPs of a ResNet-18 forward equal the closed-form count of
its convolutions, a real training step of the digits configs passes what MoCo-v2 and MixCo
pass per image, the count leaves the model and the random generators as they were, and
evaluate_run puts the count into the run's record."""
import json
import logging
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from benchmark.evaluation.step_cost import (count_flops, encoder_images, kept_rng, pass_units,
                                            run_compute, training_step_cost)
from benchmark.harness.speed import floor


def resnet18_macs(size: int, small_stem: bool) -> int:
    """Multiply-adds of a torchvision ResNet-18's convolutions (no classifier) on one size x
    size image, layer by layer: the stem (7x7 stride 2 and a stride-2 max-pool, or 3x3 stride
    1), then four stages of two basic blocks (two 3x3 convolutions each; the first block of
    stages 2-4 halves the size and adds a 1x1 projection)."""
    if small_stem:
        side, total = size, size * size * 9 * 3 * 64
    else:
        side = (size + 2 * 3 - 7) // 2 + 1
        total = side * side * 49 * 3 * 64
        side = (side + 2 - 3) // 2 + 1
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage and not block else 1
            side = (side + 2 - 3) // stride + 1
            total += side * side * 9 * (cin * cout + cout * cout)
            if stride != 1 or cin != cout:
                total += side * side * cin * cout
            cin = cout
    return total


def test_the_closed_form_is_the_published_resnet18_figure():
    """torchvision's model card: 1.81 GFLOPS (multiply-adds) at 224 px."""
    assert resnet18_macs(224, small_stem=False) == 1_813_561_344


@pytest.mark.parametrize('size, small_stem', [(224, False), (16, False), (32, True)])
def test_count_flops_of_a_resnet18_forward_is_twice_its_multiply_adds(size, small_stem):
    from methods.backbones import build_resnet
    backbone = build_resnet(18, small_stem=small_stem).eval()
    with torch.no_grad():
        flops = count_flops(lambda: backbone(torch.zeros(2, 3, size, size)))
    assert flops == 2 * 2 * resnet18_macs(size, small_stem)


def test_the_speed_harness_imports_the_same_counting():
    assert (floor.count_flops, floor.encoder_images, floor.pass_units) == \
        (count_flops, encoder_images, pass_units)


def digits_step(method: str, batch: int = 8):
    """The digits config's model and a batch of its training loader (as a run draws them)."""
    import benchmark.components  # noqa: F401  the registries
    from mmengine.registry import MODELS
    from mmengine.runner import Runner

    from benchmark.engine.config_file import read_config
    from benchmark.engine.train_views import fill_view_size
    cfg = read_config(f'configs/{method}_r18_digits.py')
    fill_view_size(cfg)
    cfg.train_dataloader.batch_size = batch
    torch.manual_seed(0)
    return MODELS.build(cfg.model), next(iter(Runner.build_dataloader(cfg.train_dataloader)))


@pytest.fixture(scope='module')
def digits_costs():
    out = {}
    for method in ('mocov2', 'mixco'):
        model, batch = digits_step(method)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        torch.manual_seed(7)
        random.seed(7)
        np.random.seed(7)
        cost = training_step_cost(model, batch)
        drawn = (torch.rand(1).item(), random.random(), np.random.rand())
        torch.manual_seed(7)
        random.seed(7)
        np.random.seed(7)
        out[method] = dict(cost=cost, model=model, batch=batch, before=before, drawn=drawn,
                           fresh=(torch.rand(1).item(), random.random(), np.random.rand()))
    return out


def test_mixco_passes_its_mixed_views_beyond_mocov2(digits_costs):
    """MoCo-v2: a query with gradient and a key per image; MixCo also half a batch of mixed
    queries (B/2 mixes of pairs): 0.5 more image with gradient per source image."""
    moco, mixco = digits_costs['mocov2']['cost'], digits_costs['mixco']['cost']
    assert (moco['images_with_grad'], moco['images_without_grad']) == (1.0, 1.0)
    assert (mixco['images_with_grad'], mixco['images_without_grad']) == (1.5, 1.0)
    assert mixco['encoder_passes'] - moco['encoder_passes'] == 0.5
    assert (moco['pass_units'], mixco['pass_units'], moco['batch']) == (4.0, 5.5, 8)


def test_step_flops_follow_the_encoder_passes(digits_costs):
    """A step costs about its forward units times the encoder's forward (31.1 MFLOP an image
    at the digits' 16 px, closed form): a bit less for the first convolution's input, which
    needs no gradient, a bit more for the heads and the queue's logits (1024 keys)."""
    forward = 2 * resnet18_macs(16, small_stem=False)
    for method, units in (('mocov2', 4.0), ('mixco', 5.5)):
        flops = digits_costs[method]['cost']['flops_per_image']
        assert units * forward * 0.98 < flops < units * forward * 1.04, method


def plain_step_flops(model, views: torch.Tensor, mixed: bool) -> int:
    """FLOPs of a plain step written out by hand over a copy of the model's encoders, counted by
    torch's FlopCounterMode: the query encoder (backbone, head) forward with gradient over the
    B views (and B/2 mixes of them for MixCo), the key encoder forward over B views without,
    the logits against the queue (and the mixes' against the keys), a cross-entropy and its
    backward."""
    import copy as copy_module

    import torch.nn.functional as F
    twin = copy_module.deepcopy(model).train()
    b = views.shape[0]
    queries = torch.cat([views, views[: b // 2]]) if mixed else views

    def step():
        q = F.normalize(twin.projection_head(twin.backbone(queries)), dim=1)
        with torch.no_grad():
            k = F.normalize(twin.projection_head_momentum(twin.backbone_momentum(views)), dim=1)
        loss = F.cross_entropy(q @ twin.queue.t(), torch.zeros(len(q), dtype=torch.long))
        if mixed:  # the mixes also score the keys
            loss = loss + F.cross_entropy(q[b:] @ k.t(), torch.zeros(b // 2, dtype=torch.long))
        loss.backward()
    return count_flops(step)


def test_step_flops_equal_an_independent_count_within_one_percent(digits_costs):
    """The counted step (the model's own loss over its preprocessed views) against a plain
    forward and backward of the same encoders on a batch of the same shape, both counted by
    torch's flop counter: within 1 % (MixCo: its mixes and keys make the harder case)."""
    seen = digits_costs['mixco']
    with kept_rng(torch.device('cpu')):
        views = seen['model'].data_preprocessor(seen['batch'], True)['inputs'][0]
    plain = plain_step_flops(seen['model'], torch.randn_like(views.float()), mixed=True)
    counted = seen['cost']['flops_per_image'] * seen['cost']['batch']
    assert abs(counted - plain) < 0.01 * plain, (counted, plain)


def test_the_count_leaves_the_model_and_the_generators_as_they_were(digits_costs):
    for method, seen in digits_costs.items():
        after = seen['model'].state_dict()
        assert all(torch.equal(after[k], v) for k, v in seen['before'].items()), method
        assert seen['drawn'] == seen['fresh'], method


def test_the_loss_runs_in_the_given_context_and_counts_the_same(digits_costs):
    """A bfloat16 run counts its step under its autocast (the optimizer wrapper's context):
    the same passes and FLOPs, dtypes aside."""
    model, batch = digits_step('mixco')
    entered = []

    def autocast(twin):
        entered.append(twin is not model)
        return torch.autocast('cpu', dtype=torch.bfloat16)
    assert training_step_cost(model, batch, autocast) == digits_costs['mixco']['cost']
    assert entered == [True]  # once, on the copy


def test_kept_rng_restores_every_generator():
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    with kept_rng(torch.device('cpu')):
        torch.rand(3), random.random(), np.random.rand()
    after = (torch.rand(1).item(), random.random(), np.random.rand())
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    assert after == (torch.rand(1).item(), random.random(), np.random.rand())


def test_evaluate_run_records_the_count_or_says_why_not(tmp_path, caplog):
    from mmengine.config import Config

    from benchmark.engine.run_info import RunInfoHook
    from benchmark.evaluation.evaluate import count_training_step, evaluate_run
    model, batch = digits_step('mixco')
    cfg = Config(dict(model=dict(type='MixCoMoCo', backbone=dict(depth=18)),
                      train_dataloader=dict(batch_size=8, dataset=dict(
                          type='Digits', data_root='', split='train', input_size=16)),
                      train_cfg=dict(max_epochs=1), work_dir=str(tmp_path / 'work')))
    loader = type('Loader', (list,), dict(batch_size=8, dataset=SimpleNamespace()))([batch])
    info = RunInfoHook()
    info.epoch_seconds, info.images_trained = [3.0, 4.5], 1440  # this process's
    runner = SimpleNamespace(model=model, hooks=[info], train_dataloader=loader, world_size=2,
                             epoch=1, visualizer=None, logger=logging.getLogger('step_cost'))
    path = evaluate_run(runner, cfg, str(tmp_path / 'results'), protocols=('knn',),
                        config_text='test')
    compute = json.loads(path.read_text())['extra']['compute']
    step = training_step_cost(model, batch)
    assert {k: compute[k] for k in step} == pytest.approx(step)
    assert compute['encoder_passes'] == 2.5
    # the run's total: its two processes' images times the step's FLOPs per image
    assert (compute['train_images'], compute['processes'], compute['device_seconds']) == \
        (2880, 2, 15.0)
    assert compute['train_flops'] == pytest.approx(step['flops_per_image'] * 2880)
    # a resume from a checkpoint that did not count its images: the run's total is not known
    assert run_compute(step, dict(world_size=2, images_trained=None))['train_flops'] is None

    runner.train_dataloader = SimpleNamespace(batch_size=8)  # not a loader: no count
    with caplog.at_level(logging.WARNING, logger='step_cost'):
        assert count_training_step(runner, model) is None
    assert 'the training step was not counted for the record (TypeError' in caplog.text
