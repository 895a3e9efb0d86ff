"""The in-process runs of the fault tests (tests/harness/faults/test_resume_in_process.py,
test_full_disk_in_process.py): the real tool path (launch.build_runner, as `tools/train.py`
calls it, and its --resume choice), the real hooks (SafeCheckpointHook, PreemptionHook,
KillHook, NaNGuardHook), the real methods and data, with an 8-channel backbone in place of the
ResNet so that a run of 6 iterations and its checkpoints take a second. A module that uses
them imports the fixtures (`small_runs` and `close_run_loggers` apply to all its tests).

A SIGKILL leaves the disk as it is and runs nothing more; here `KillHook`'s kill raises
`Killed`, which nothing catches, at the same moment (after every other hook of the iteration)."""
import logging
import os.path as osp
import signal
from itertools import count

import pytest
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import MMLogger

import methods.base
from benchmark.data.fakes import make_fake_tiny_imagenet
from benchmark.engine import preemption
from benchmark.engine.compat import manager_instances
from benchmark.harness.faults import hooks as fault_hooks
from benchmark.harness.faults import runs as fr
from tests.conftest import tiny_backbone
from tools import train

EPOCHS, PER_EPOCH, INTERVAL = 2, 3, 2  # 12 images, batch 4: iter_2, epoch_1, iter_4, epoch_2
TOTAL = EPOCHS * PER_EPOCH
DEVICE_VIEWS = ("model = dict(data_preprocessor=dict(type='GPUViewPreprocessor', view='mocov2'))\n"
                "train_dataloader = dict(dataset=dict(view='raw_uint8'))\n")
_names = count()


class Killed(BaseException):
    """What a SIGKILL is to the process: nothing after it runs (no except clause catches it)."""


@pytest.fixture(scope='module', autouse=True)
def small_runs():
    """Tiny backbones, wandb off, and the signal handlers the runs install put back. The
    config's text (logged, dumped, and kept in every checkpoint's meta) is its plain dict
    rather than yapf-formatted code: the formatting took a third of a run."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(methods.base, 'build_resnet', tiny_backbone)
        patch.setattr(Config, 'pretty_text', property(lambda cfg: repr(cfg.to_dict())))
        patch.setenv('WANDB_MODE', 'disabled')
        patch.delenv('TRAIN_EXIT_CODE_FILE', raising=False)
        patch.delenv('RANK', raising=False)
        yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture(autouse=True)
def close_run_loggers():
    """The runs' loggers print to this test's captured stdout, closed after it: their console
    handlers go, so that a later test's log lines do not hit a closed stream."""
    before = set(manager_instances(MMLogger))
    yield
    instances = manager_instances(MMLogger)
    for name in set(instances) - before:
        logger = instances[name]
        for handler in [h for h in logger.handlers if type(h) is logging.StreamHandler]:
            logger.removeHandler(handler)


@pytest.fixture
def kills(monkeypatch):
    """KillHook's SIGKILL raises Killed; os._exit (pre-emption) raises SystemExit(code)."""
    def kill():
        raise Killed()

    def exit_(code):
        raise SystemExit(code)
    monkeypatch.setattr(fault_hooks, '_kill_now', kill)
    monkeypatch.setattr(preemption.os, '_exit', exit_)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    return make_fake_tiny_imagenet(tmp_path_factory.mktemp('data'), num_classes=2,
                                   train_per_class=6, val_per_class=4, size=16)


def config(folder, data_root, method='mixco', fault='', extra='', keep=3) -> str:
    """A config of its own name (mmengine keys its loggers and message hubs by it) over the
    fault campaign's tiny config: 16 px, ResNet-18 at width 0.25, no loader workers, an
    iteration checkpoint every 2;
    ``extra`` is merged into it, e.g. ``"model = dict(mix_warmup_epochs=1)"``."""
    base = fr.write_config(osp.join(folder, f'base{next(_names)}.py'), method, data_root,
                           epochs=EPOCHS, iter_interval=INTERVAL, max_keep_ckpts=keep,
                           fault=fault, workers=0, width=0.25)
    middle = osp.join(folder, f'base{next(_names)}.py')
    with open(middle, 'w') as handle:
        handle.write(f'_base_ = [{base!r}]\ntrain_dataloader = dict(dataset=dict(input_size=16))\n')
    path = osp.join(folder, f'run{next(_names)}.py')
    with open(path, 'w') as handle:
        handle.write(f'_base_ = [{middle!r}]\n{extra}')
    return path


class Steps(Hook):
    """Counts the training iterations a run performs."""

    def __init__(self):
        self.done = 0

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.done += 1


def run(cfg: str, work: str, *options: str) -> int:
    """tools/train.py's runner for ``cfg`` (``options`` as on its command line), trained; the
    number of iterations it trained."""
    runner, _ = train.build_runner(train.parse_args([cfg, '--work-dir', work, '--no-eval',
                                                     *options]))
    steps = Steps()
    runner.register_hook(steps, 'LOWEST')
    runner.train()
    return steps.done


def weights(work: str) -> dict:
    return fr.load_weights(fr.final_checkpoint(work, EPOCHS))  # weights-only load


_REFERENCES = {}


@pytest.fixture
def reference(data, tmp_path_factory):
    """``reference(method, extra)``: the final weights of the uninterrupted run (once each)."""
    def get(method='mixco', extra=''):
        key = (str(data), method, extra)
        if key not in _REFERENCES:
            folder = str(tmp_path_factory.mktemp('reference'))
            assert run(config(folder, data, method, extra=extra), osp.join(folder, 'w')) == TOTAL
            _REFERENCES[key] = weights(osp.join(folder, 'w'))
        return _REFERENCES[key]
    return get


def kill_at(tmp_path, data, at, method='mixco', extra='') -> str:
    """A run killed after iteration ``at``; its work dir."""
    work = str(tmp_path / 'run')
    with pytest.raises(Killed):
        run(config(str(tmp_path), data, method, f"dict(type='KillHook', at_iter={at})", extra),
            work)
    assert fr.referenced_corrupt(work) == []
    return work


def resume(tmp_path, data, work, method='mixco', extra='') -> int:
    return run(config(str(tmp_path), data, method, extra=extra), work, '--resume')
