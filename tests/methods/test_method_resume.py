"""Every method continues bit-identically from a checkpoint's contents: 5 SGD steps in one go
equal 3 steps, then the model's state dict, the optimizer's and the RNG state handed to a model
built afresh (other initial weights), then 2 steps. What a method keeps between steps (MoCo's
queue, pointer and key encoder, UnMix's step counter, batch-norm statistics) is in its state
dict, and its random draws (lambdas, permutations, shuffle-BN) come from the saved RNG state.
tests/harness/faults/test_resume_in_process.py resumes whole runs of some of them."""
import copy
import functools

import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MessageHub
from mmengine.registry import MODELS

import methods  # noqa: F401  registers the models
from benchmark.engine.rng_state import capture_rng_state, restore_rng_state
from benchmark.engine.train_views import fill_view_size
from benchmark.names import METHOD_NAMES
from benchmark.layout import method_configs

STEPS, CUT = 5, 3
# Every method of benchmark/names.py METHODS, built from its config (configs/<method>_r18_tiny.py,
# else its first configs/<method>_r<depth>_*.py) with a small queue where it has one.
METHODS = sorted(METHOD_NAMES.values())
# Model settings a method needs beside that to mix or classify within 5 steps of 4 images.
OVERRIDES = {'mochi': dict(mix_warmup_epochs=0, mix_hardest=8, mix_synthetic=4,
                           mix_query_synthetic=2),
             'supervised': dict(num_classes=3)}


@pytest.fixture(autouse=True)
def tiny(tiny_backbones, monkeypatch):
    # MoCHi mixes once its warm-up is over; the epoch is put back after the test
    monkeypatch.setitem(MessageHub.get_current_instance().runtime_info, 'epoch', 1)


@functools.lru_cache(maxsize=None)
def model_config(method: str) -> Config:
    configs = method_configs(method)
    if not configs:
        pytest.fail(f'{method}: no configs/{method}_r<depth>_<data>.py to build it from; every '
                    'method of benchmark/names.py METHODS needs a config')
    cfg = Config.fromfile(str(configs[0]))
    fill_view_size(cfg)  # device views (the _digits configs) take the data's size, as tools do
    return cfg.model


def build(method: str, seed: int):
    cfg = copy.deepcopy(model_config(method))
    if 'queue_size' in cfg:
        cfg.queue_size = 16
    cfg.update(OVERRIDES.get(method, {}))
    torch.manual_seed(seed)
    model = MODELS.build(cfg).train()
    return model, torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)


def batch(i: int, method: str):
    generator = torch.Generator().manual_seed(100 + i)
    images = [torch.rand(4, 3, 16, 16, generator=generator) for _ in range(2)]
    if method == 'supervised':
        return images[0], torch.randint(0, 3, (4,), generator=generator)
    return images, None


def steps(model, optimizer, method, first, last):
    for i in range(first, last):
        inputs, labels = batch(i, method)
        losses = model(inputs, labels, mode='loss')
        optimizer.zero_grad()
        sum(v for k, v in losses.items() if 'loss' in k).backward()
        optimizer.step()


def straight_and_cut(method):
    """(the model trained STEPS steps in one go, the same model and optimizer after CUT)."""
    straight, opt = build(method, seed=0)
    torch.manual_seed(123)
    steps(straight, opt, method, 0, STEPS)
    first, opt = build(method, seed=0)
    torch.manual_seed(123)
    steps(first, opt, method, 0, CUT)
    return straight, first, opt


def test_overrides_are_for_methods():
    assert set(OVERRIDES) <= set(METHODS), sorted(set(OVERRIDES) - set(METHODS))


@pytest.mark.parametrize('method', METHODS)
def test_resume_from_state_dicts_and_rng_state_is_bit_identical(method):
    straight, first, opt = straight_and_cut(method)
    saved = copy.deepcopy((first.state_dict(), opt.state_dict(), capture_rng_state()))
    torch.manual_seed(999)  # what happens between the save and the resume draws elsewhere
    second, opt = build(method, seed=7)
    assert any(not torch.equal(a, b) for a, b in zip(second.state_dict().values(),
                                                     saved[0].values()))
    second.load_state_dict(saved[0])
    opt.load_state_dict(saved[1])
    restore_rng_state(saved[2])
    steps(second, opt, method, CUT, STEPS)

    want, got = straight.state_dict(), second.state_dict()
    assert want.keys() == got.keys()
    assert [k for k in want if not torch.equal(want[k], got[k])] == []
    if 'queue' in want:
        assert int(want['queue_ptr']) == STEPS * 4 % 16  # the queue was written to


@pytest.mark.parametrize('method', ['mixco', 'unmix'])
def test_without_the_rng_state_a_mixing_method_differs(method):
    """The control: the same hand-over with another RNG state draws other mixes."""
    straight, first, opt = straight_and_cut(method)
    second, opt2 = build(method, seed=7)
    second.load_state_dict(first.state_dict())
    opt2.load_state_dict(opt.state_dict())
    torch.manual_seed(999)
    steps(second, opt2, method, CUT, STEPS)
    want, got = straight.state_dict(), second.state_dict()
    assert [k for k in want if not torch.equal(want[k], got[k])]
