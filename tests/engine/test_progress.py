"""ProgressHook: a line per epoch and at most one per interval within an epoch, the time per
epoch and ETA measured from this process's iterations (a resumed run from its resume point),
progress.json beside the checkpoints."""
import json
from types import SimpleNamespace

from benchmark import dist
from benchmark.engine import progress
from benchmark.engine.progress import (PROGRESS_FILE, ProgressHook, duration, progress_line,
                                       read_progress)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class FakeRunner(SimpleNamespace):
    """What the hook reads of mmengine's Runner, with a logger that keeps its lines."""

    def __init__(self, work_dir, iters_per_epoch=10, max_epochs=3, start_epoch=0):
        lines = []
        super().__init__(work_dir=str(work_dir), max_epochs=max_epochs,
                         max_iters=iters_per_epoch * max_epochs, epoch=start_epoch,
                         iter=start_epoch * iters_per_epoch, per_epoch=iters_per_epoch,
                         lines=lines, logger=SimpleNamespace(info=lines.append))


def train(hook, runner, clock, seconds_per_iter, epochs=None):
    """Drive the hook as EpochBasedTrainLoop calls it."""
    hook.before_train(runner)
    for _ in range(epochs or runner.max_epochs - runner.epoch):
        for idx in range(runner.per_epoch):
            clock.now += seconds_per_iter
            hook.after_train_iter(runner, idx)
            runner.iter += 1
        hook.after_train_epoch(runner)
        runner.epoch += 1
    hook.after_train(runner)


def test_duration_reads_as_hours_minutes_and_seconds():
    assert duration(42.4) == '42s' and duration(185) == '3m05s' and duration(60) == '1m00s'
    assert duration(3725) == '1h02m05s' and duration(-3) == '0s'


def test_a_line_per_epoch_with_time_per_epoch_and_eta(tmp_path):
    clock, runner = Clock(), FakeRunner(tmp_path)
    hook = ProgressHook(interval_s=30, clock=clock)
    train(hook, runner, clock, seconds_per_iter=0.5)
    assert runner.lines == ['epoch 1/3 iter 10/30 · 5.0 s/epoch · ETA 10s',
                            'epoch 2/3 iter 20/30 · 5.0 s/epoch · ETA 5s',
                            'epoch 3/3 iter 30/30 · 5.0 s/epoch · ETA 0s',
                            'trained: 3 epochs, 15s in this process']
    state = read_progress(str(tmp_path))
    assert state['phase'] == 'trained' and state['epoch'] == 3 and state['iter'] == 30
    assert state['max_epochs'] == 3 and state['max_iters'] == 30 and state['train_s'] == 15.0
    assert state['s_per_epoch'] == 5.0 and state['eta_s'] == 0.0 and state['updated'] > 0


def test_within_a_long_epoch_at_most_one_line_per_interval(tmp_path):
    clock, runner = Clock(), FakeRunner(tmp_path, iters_per_epoch=10, max_epochs=1)
    hook = ProgressHook(interval_s=30, clock=clock)
    train(hook, runner, clock, seconds_per_iter=12)  # a line after 36 s, 72 s, 108 s, the end
    assert runner.lines[:3] == ['epoch 1/1 iter 3/10 · 120.0 s/epoch · ETA 1m24s',
                                'epoch 1/1 iter 6/10 · 120.0 s/epoch · ETA 48s',
                                'epoch 1/1 iter 9/10 · 120.0 s/epoch · ETA 12s']
    assert runner.lines[3] == 'epoch 1/1 iter 10/10 · 120.0 s/epoch · ETA 0s'
    assert len(runner.lines) == 5


def test_progress_json_while_training(tmp_path):
    clock, runner = Clock(), FakeRunner(tmp_path)
    hook = ProgressHook(clock=clock)
    hook.before_train(runner)  # nothing measured yet
    first = json.loads((tmp_path / PROGRESS_FILE).read_text())
    assert first['phase'] == 'training' and first['epoch'] == 1 and first['iter'] == 0
    assert first['s_per_epoch'] is None and first['eta_s'] is None
    assert progress_line(first) == 'epoch 1/3 iter 0/30'
    for idx in range(10):
        clock.now += 2.0
        hook.after_train_iter(runner, idx)
        runner.iter += 1
    hook.after_train_epoch(runner)
    state = read_progress(str(tmp_path))
    assert (state['epoch'], state['iter'], state['s_per_epoch'], state['eta_s']) == (1, 10, 20.0, 40.0)
    assert not list(tmp_path.glob('.*.tmp'))  # written through a temporary file


def test_a_resumed_run_measures_from_its_resume_point(tmp_path):
    clock, runner = Clock(), FakeRunner(tmp_path, iters_per_epoch=10, max_epochs=4, start_epoch=2)
    hook = ProgressHook(clock=clock)
    train(hook, runner, clock, seconds_per_iter=1.0, epochs=1)
    assert runner.lines[0] == 'epoch 3/4 iter 30/40 · 10.0 s/epoch · ETA 10s'


def test_only_the_main_process_prints_and_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(progress.dist, 'is_main', lambda: False)
    assert dist.is_main is progress.dist.is_main
    clock, runner = Clock(), FakeRunner(tmp_path)
    train(ProgressHook(clock=clock), runner, clock, seconds_per_iter=1.0)
    assert runner.lines == [] and read_progress(str(tmp_path)) is None


def test_read_progress_of_a_missing_or_broken_file(tmp_path):
    assert read_progress(str(tmp_path)) is None
    (tmp_path / PROGRESS_FILE).write_text('{"epoch": ')
    assert read_progress(str(tmp_path)) is None
