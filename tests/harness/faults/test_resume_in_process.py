"""Kill-and-resume, in-process (tests/harness/faults/in_process.py: the real tool path, hooks,
methods and data, an 8-channel backbone). tests/e2e/test_faults.py kills real processes (one
process, and two gloo processes), tests/e2e/test_cluster_signals.py signals them."""
import functools
import glob
import os
import os.path as osp
import random
import shutil
import weakref

import numpy as np
import pytest
import torch

from benchmark.engine import launch, preemption
from benchmark.engine.checkpoint_hook import non_finite_tensors
from benchmark.engine.checkpoints import choose_resume_checkpoint, read_checkpoint
from benchmark.exit_codes import DIVERGED_EXIT_CODE
from benchmark.engine.rng_state import capture_rng_state
from benchmark.harness.faults import runs as fr
from benchmark.layout import LAST_CHECKPOINT, PREEMPTED_MARKER
from benchmark.reports.records import load_records
from tests.harness.faults.in_process import (  # noqa: F401  fixtures, two of them autouse
    DEVICE_VIEWS, EPOCHS, PER_EPOCH, TOTAL, Killed, close_run_loggers, config, data, kill_at,
    kills, reference, resume, run, small_runs, weights)
from tools import train


@pytest.mark.parametrize('method, extra', [('mixco', ''), ('mixco', DEVICE_VIEWS), ('simclr', '')],
                         ids=['mixco', 'mixco-device-views', 'simclr'])
@pytest.mark.slow
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


@pytest.mark.slow
def test_views_drawn_one_batch_ahead_train_the_same_and_resume_bit_identical(
        tmp_path, data, kills, reference, monkeypatch):
    """The loop that takes its batches one ahead (``prefetch=True``: on a GPU the next views
    are drawn on a side stream during the step, here simply earlier) trains exactly as the
    plain loop; killed after iteration 5, with batch 6 already taken and drawn, --resume takes
    it again from iter_4.pth and ends with the plain run's weights, bit for bit."""
    from benchmark.data.gpu_views import GPUViewPreprocessor
    prepared = []
    real = GPUViewPreprocessor.prepare
    monkeypatch.setattr(GPUViewPreprocessor, 'prepare',
                        lambda self, data: prepared.append(1) or real(self, data))
    ahead = DEVICE_VIEWS.replace("view='mocov2')", "view='mocov2', prefetch=True)")
    assert ahead != DEVICE_VIEWS
    work = kill_at(tmp_path, data, 5, 'mixco', ahead)
    assert len(prepared) == 6  # batch 6 was drawn before step 5 was queued
    assert resume(tmp_path, data, work, 'mixco', ahead) == TOTAL - 4
    assert len(prepared) == 6 + TOTAL - 4
    assert fr.differing(reference('mixco', DEVICE_VIEWS), weights(work)) == []


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


@pytest.mark.slow
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


@pytest.mark.slow
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
    code and the line reach the script (torchrun would end the job with 1). The runner is freed
    before main returns."""
    monkeypatch.setenv('TRAIN_EXIT_CODE_FILE', str(tmp_path / 'exit_code'))
    work, results = str(tmp_path / 'run'), str(tmp_path / 'results')
    cfg = config(str(tmp_path), data, fault="dict(type='PoisonHook', at_iter=3)")
    runners, from_cfg = [], launch.Runner.from_cfg

    def built(cfg):
        runner = from_cfg(cfg)
        runners.append(weakref.ref(runner))
        return runner
    monkeypatch.setattr(launch.Runner, 'from_cfg', built)
    assert train.main([cfg, '--work-dir', work, '--results-dir', results]) == \
        DIVERGED_EXIT_CODE == 3
    # freed before main returns: a runner's DDP wrapper keeps the process group alive, and
    # freed at the interpreter's shutdown it aborts the process (benchmark.dist.free_groups)
    assert len(runners) == 1 and runners[0]() is None
    (record,) = load_records(results)
    assert record['status'] == 'diverged' and 'iteration 3' in record['extra']['error']
    checkpoints = sorted(osp.basename(p) for p in glob.glob(osp.join(work, '*.pth')))
    assert checkpoints == ['iter_2.pth']
    assert non_finite_tensors(fr.load_weights(osp.join(work, 'iter_2.pth'))) == []
    assert (tmp_path / 'exit_code').read_text().startswith(
        '3\nerror: training diverged at iteration 3 (epoch 1): ')  # the line dist_train.sh ends with


class SameSecond:
    """The time module for mmengine's Runner, whose start time (the name of its logger,
    visualizer and message hub) is always the same second."""

    def __getattr__(self, name):
        import time
        return getattr(time, name)

    @staticmethod
    def strftime(form, *args):
        return '20260101_000000'


def test_a_resume_of_a_run_that_ended_writes_no_second_record(tmp_path, data, monkeypatch):
    """A stop the job did not stop for (a SIGTERM to a loader worker, which leaves it to its
    trainer) lets it end and record; the resume started right after trains nothing and finds
    the record of the same final checkpoint: one record, not two. A run that trained does
    record (a resume that lengthened it, a fresh run). Every run here starts in the same
    second, as a resume that trains nothing and the run after it may: each still gets its own
    logger and visualizer (mmengine names them after the config and the second)."""
    import mmengine.runner.runner as runner_module
    monkeypatch.setattr(runner_module, 'time', SameSecond())
    work, results = str(tmp_path / 'run'), str(tmp_path / 'results')
    monkeypatch.setattr(train, 'evaluate_run', functools.partial(train.evaluate_run,
                                                                 protocols=('knn',)))
    cfg = config(str(tmp_path), data)
    assert train.main([cfg, '--work-dir', work, '--results-dir', results]) == 0
    (first,) = load_records(results)
    assert train.main([cfg, '--work-dir', work, '--results-dir', results, '--resume']) == 0
    assert [r['id'] for r in load_records(results)] == [first['id']]
    assert train.main([cfg, '--work-dir', work, '--results-dir', results, '--resume',
                       '--cfg-options', 'train_cfg.max_epochs=3']) == 0
    assert len(load_records(results)) == 2  # it trained epoch 3: a record of epoch_3.pth
