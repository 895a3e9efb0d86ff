"""Kill-and-resume, in-process: the real tool path (`tools/train.py`'s build_runner and --resume
choice), the real hooks (SafeCheckpointHook, PreemptionHook, KillHook, NaNGuardHook), the real
methods and data, with an 8-channel backbone in place of the ResNet so that a run of 6
iterations and its checkpoints take a second.

A SIGKILL leaves the disk as it is and runs nothing more; here `KillHook`'s kill raises
`Killed`, which nothing catches, at the same moment (after every other hook of the iteration).
tests/e2e/test_faults.py kills real processes (one process, and two gloo processes)."""
import functools
import glob
import logging
import os
import os.path as osp
import random
import shutil
import signal
from itertools import count

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import MMLogger

import methods.base
from benchmark.data.fakes import make_fake_tiny_imagenet
from benchmark.engine import preemption
from benchmark.engine.checkpoint_hook import non_finite_tensors
from benchmark.engine.compat import manager_instances
from benchmark.engine.checkpoints import choose_resume_checkpoint, read_checkpoint
from benchmark.engine.nan_guard import DIVERGED_EXIT_CODE
from benchmark.engine.rng_state import capture_rng_state
from benchmark.harness.faults import hooks as fault_hooks
from benchmark.harness.faults import runs as fr
from benchmark.layout import LAST_CHECKPOINT, PREEMPTED_MARKER
from benchmark.reports.records import load_records
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
    fault campaign's tiny config: 16 px, no loader workers, an iteration checkpoint every 2;
    ``extra`` is merged into it, e.g. ``"model = dict(mix_warmup_epochs=1)"``."""
    base = fr.write_config(osp.join(folder, f'base{next(_names)}.py'), method, data_root,
                           epochs=EPOCHS, iter_interval=INTERVAL, max_keep_ckpts=keep,
                           fault=fault, workers=0)
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
        if (method, extra) not in _REFERENCES:
            folder = str(tmp_path_factory.mktemp('reference'))
            assert run(config(folder, data, method, extra=extra), osp.join(folder, 'w')) == TOTAL
            _REFERENCES[method, extra] = weights(osp.join(folder, 'w'))
        return _REFERENCES[method, extra]
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


@pytest.mark.parametrize('method, extra', [('mixco', ''), ('mixco', DEVICE_VIEWS), ('simclr', '')],
                         ids=['mixco', 'mixco-device-views', 'simclr'])
def test_kill_mid_epoch_then_resume_is_bit_identical(method, extra, tmp_path, data, kills,
                                                     reference):
    """Killed after iteration 5 (epoch 2, batch 2 of 3): --resume picks iter_4.pth, trains the
    2 iterations left from the sampler's place in the epoch and the saved RNG states, and ends
    with the uninterrupted run's weights, bit for bit (the method's buffers included). Every
    method's own state: tests/methods/test_method_resume.py."""
    work = kill_at(tmp_path, data, 5, method, extra)
    path, messages = choose_resume_checkpoint(work)
    assert path == osp.join(work, 'iter_4.pth') and messages == [f'resuming from {path}']
    assert read_checkpoint(path)['meta']['iter'] == 4
    assert resume(tmp_path, data, work, method, extra) == TOTAL - 4
    want = reference(method, extra)
    assert fr.differing(want, weights(work)) == []
    if 'simclr' not in method:
        assert want['queue'].shape == (16, 128)  # the queue travels with the weights


def test_resume_with_other_rng_states_differs(tmp_path, data, kills, reference):
    """The control: the same resume (same sampler place) from a checkpoint whose RNG states are
    another moment's diverges, so the states it restores are what makes the resume identical."""
    work = kill_at(tmp_path, data, 5)
    checkpoint = torch.load(osp.join(work, 'iter_4.pth'), weights_only=False)
    assert len(checkpoint['rng_states']) == 1  # one process
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    checkpoint['rng_states'] = [capture_rng_state()]
    torch.save(checkpoint, osp.join(work, 'iter_4.pth'))
    assert resume(tmp_path, data, work) == TOTAL - 4
    assert fr.differing(reference(), weights(work))


def test_resume_lengthens_a_finished_run(tmp_path, data, kills):
    """A run that ended after epoch 1, resumed with max_epochs 2, continues from epoch_1.pth:
    it trains epoch 2 only, and its checkpoint loads weights-only with the queue in it."""
    work = str(tmp_path / 'run')
    assert run(config(str(tmp_path), data), work, '--cfg-options', 'train_cfg.max_epochs=1') \
        == PER_EPOCH
    assert resume(tmp_path, data, work) == PER_EPOCH
    checkpoint = read_checkpoint(fr.final_checkpoint(work, EPOCHS))  # weights-only
    assert (checkpoint['meta']['epoch'], checkpoint['meta']['iter']) == (EPOCHS, TOTAL)
    assert checkpoint['state_dict']['queue'].shape == (16, 128)


@pytest.mark.parametrize('sig, at', [('SIGUSR1', 3), ('SIGTERM', 5)],
                         ids=['SIGUSR1-last-step-of-epoch-1', 'SIGTERM-mid-epoch-2'])
def test_signal_checkpoints_exits_143_and_resumes_identically(sig, at, tmp_path, data, kills,
                                                              reference):
    """The real signal arrives during iteration ``at``: the step finishes, its checkpoint is
    written (on an epoch's last step, after the epoch's own end), the `preempted` marker is
    written (mid-epoch: holding the iteration), the exit code is 143; the resumed run trains
    only what was left."""
    work = str(tmp_path / 'run')
    cfg = config(str(tmp_path), data, fault=f"dict(type='KillHook', signal_at_iter={at}, "
                                           f"sig='{sig}')")
    with pytest.raises(SystemExit) as stop:
        run(cfg, work)
    assert stop.value.code == preemption.PREEMPTED_EXIT_CODE == 143
    marker = open(osp.join(work, PREEMPTED_MARKER)).read()
    assert marker == f'{at}\n' or at == PER_EPOCH
    newest = 'epoch_1.pth' if at == PER_EPOCH else f'iter_{at}.pth'
    assert choose_resume_checkpoint(work)[0] == osp.join(work, newest)
    assert fr.referenced_corrupt(work) == []
    assert resume(tmp_path, data, work) == TOTAL - at
    assert not osp.exists(osp.join(work, PREEMPTED_MARKER))
    assert fr.differing(reference(), weights(work)) == []


class Snapshots:
    """The checkpoint files of a work dir at every moment a kill could find them: before and
    after each rename and removal, and with a temporary file half written (hard links: a file
    is replaced, never rewritten, so a link keeps what it held)."""

    def __init__(self, work: str, root: str):
        self.work, self.root, self.taken, self.half_written = work, root, [], []

    def take(self, half_written: str = '') -> None:
        folder = osp.join(self.root, f'{len(self.taken):03d}')
        os.makedirs(folder)
        for name in os.listdir(self.work):
            source = osp.join(self.work, name)
            if not osp.isfile(source):
                continue
            if name == LAST_CHECKPOINT:  # the pointer names a file of the snapshot
                text = open(source).read().replace(self.work, folder)
                open(osp.join(folder, name), 'w').write(text)
            elif source == half_written:
                data = open(source, 'rb').read()
                open(osp.join(folder, name), 'wb').write(data[:len(data) // 2])
                self.half_written.append(folder)
            else:
                os.link(source, osp.join(folder, name))
        self.taken.append(folder)

    def wrap(self, real, temporary_source: bool = False):
        def operation(*args, **kwargs):
            in_work = osp.dirname(osp.abspath(args[0])) == self.work
            if in_work:
                if temporary_source and args[0].endswith('.pth.tmp'):
                    self.take(half_written=args[0])
                self.take()
            out = real(*args, **kwargs)
            if in_work:
                self.take()
            return out
        return operation


@pytest.mark.parametrize('keep', [1, -1])
def test_a_kill_at_any_moment_of_a_checkpoint_write_leaves_a_whole_newest_checkpoint(
        keep, tmp_path, data, kills, reference, monkeypatch):
    """Every state a checkpoint write passes through (temporary file half written, renamed,
    `last_checkpoint` replaced, the oldest removed), with max_keep_ckpts 1 and unlimited: every
    checkpoint a file name or `last_checkpoint` names loads, and --resume picks the newest whole
    one, never older than one `last_checkpoint` named before; from the worst moment (the newest
    file half written) the resumed run ends with the uninterrupted run's weights."""
    work = str(tmp_path / 'run')
    os.makedirs(work)
    shots = Snapshots(work, str(tmp_path / 'shots'))
    replace, remove = os.replace, os.remove
    monkeypatch.setattr(os, 'replace', shots.wrap(replace, temporary_source=True))
    monkeypatch.setattr(os, 'remove', shots.wrap(remove))
    assert run(config(str(tmp_path), data, keep=keep), work) == TOTAL
    monkeypatch.setattr(os, 'replace', replace)
    monkeypatch.setattr(os, 'remove', remove)
    saved, pointed = set(), 0  # iterations on disk so far; the newest last_checkpoint named
    for folder in shots.taken:
        assert fr.referenced_corrupt(folder) == [], folder
        path, _ = choose_resume_checkpoint(folder)
        saved |= {int(read_checkpoint(p)['meta']['iter'])
                  for p in glob.glob(osp.join(folder, '*.pth'))}
        if saved:
            assert int(read_checkpoint(path)['meta']['iter']) >= pointed, folder
        if osp.isfile(osp.join(folder, LAST_CHECKPOINT)):
            pointed = int(read_checkpoint(open(osp.join(folder, LAST_CHECKPOINT)).read())
                          ['meta']['iter'])
    assert saved == {2, 3, 4, 6} and pointed == 6
    half_written = shots.half_written
    assert len(half_written) == 4  # iter_2, epoch_1, iter_4, epoch_2
    worst = half_written[-1]  # epoch_2 half written: last_checkpoint still names iter_4
    shutil.copytree(worst, str(tmp_path / 'resumed'))
    resumed = str(tmp_path / 'resumed')
    pointer = osp.join(resumed, LAST_CHECKPOINT)
    open(pointer, 'w').write(open(pointer).read().replace(worst, resumed))
    assert resume(tmp_path, data, resumed) == TOTAL - 4
    assert fr.differing(reference(), weights(resumed)) == []


def test_kill_during_the_evaluation_then_resume_evaluates(tmp_path, data, kills, reference,
                                                          monkeypatch):
    """Killed while the end-of-training evaluation runs: the final checkpoint is whole and holds
    the trained weights; --resume trains nothing more, evaluates and writes the record."""
    work, results = str(tmp_path / 'run'), str(tmp_path / 'results')
    real = train.evaluate_run

    def killed_evaluation(runner, *args, **kwargs):
        assert fr.referenced_corrupt(work) == []
        assert choose_resume_checkpoint(work)[0] == fr.final_checkpoint(work, EPOCHS)
        assert fr.differing(weights(work), runner.model.state_dict()) == []
        raise Killed()
    monkeypatch.setattr(train, 'evaluate_run', killed_evaluation)
    with pytest.raises(Killed):
        train.main([config(str(tmp_path), data), '--work-dir', work, '--results-dir', results])
    assert load_records(results) == []
    monkeypatch.setattr(train, 'evaluate_run', functools.partial(real, protocols=('knn',)))
    assert train.main([config(str(tmp_path), data), '--work-dir', work, '--results-dir',
                       results, '--resume']) == 0
    (record,) = load_records(results)
    assert record['status'] == 'ok' and record['method'] == 'mixco'
    assert fr.differing(reference(), weights(work)) == []


def test_nan_stops_the_run_saves_nothing_non_finite_and_records_divergence(tmp_path, data,
                                                                         kills, monkeypatch):
    """A NaN weight before iteration 3: exit code 3 at iteration 3, a `diverged` record, and
    only the checkpoint before it (iter_2.pth), which is finite. Under tools/dist_train.sh the
    code reaches the script (torchrun would end the job with 1)."""
    monkeypatch.setenv('TRAIN_EXIT_CODE_FILE', str(tmp_path / 'exit_code'))
    work, results = str(tmp_path / 'run'), str(tmp_path / 'results')
    cfg = config(str(tmp_path), data, fault="dict(type='PoisonHook', at_iter=3)")
    assert train.main([cfg, '--work-dir', work, '--results-dir', results]) == \
        DIVERGED_EXIT_CODE == 3
    (record,) = load_records(results)
    assert record['status'] == 'diverged' and 'iteration 3' in record['extra']['error']
    checkpoints = sorted(osp.basename(p) for p in glob.glob(osp.join(work, '*.pth')))
    assert checkpoints == ['iter_2.pth']
    assert non_finite_tensors(fr.load_weights(osp.join(work, 'iter_2.pth'))) == []
    assert (tmp_path / 'exit_code').read_text() == '3\n'
