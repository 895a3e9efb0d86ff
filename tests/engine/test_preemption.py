"""PreemptionHook unit by unit: the handler sets a flag; a flagged step saves and exits 143,
telling tools/dist_train.sh so; the training loader's workers leave the signals to the trainer."""
import os
import signal
from types import SimpleNamespace

import pytest
from mmengine.registry import HOOKS

from benchmark.engine import held_signals, preemption
from benchmark.engine.checkpoint_hook import SafeCheckpointHook
from benchmark.engine.preemption import PreemptionHook
from benchmark.exit_codes import PREEMPTED_EXIT_CODE
from benchmark.layout import PREEMPTED_MARKER


class _Logger:
    def __init__(self):
        self.lines = []

    def warning(self, text):
        self.lines.append(text)


class _Saver(SafeCheckpointHook):
    """A SafeCheckpointHook that records what it was asked to save."""

    def __init__(self):
        super().__init__(interval=1)
        self.calls = []

    def save_iteration(self, runner):
        self.calls.append(('iter', runner.iter + 1))
        return f'{runner.work_dir}/iter_{runner.iter + 1}.pth'

    def save_epoch(self, runner):
        self.calls.append(('epoch', runner.epoch + 1))
        return f'{runner.work_dir}/epoch_{runner.epoch + 1}.pth'


def _runner(work_dir, iteration, epoch_len=10):
    return SimpleNamespace(hooks=[object(), _Saver()], iter=iteration, epoch=0,
                           train_dataloader=[None] * epoch_len, work_dir=str(work_dir),
                           logger=_Logger())


@pytest.fixture
def exits(monkeypatch):
    """os._exit raises SystemExit(code) instead of ending pytest."""
    def fake_exit(code):
        raise SystemExit(code)
    monkeypatch.setattr(preemption.os, '_exit', fake_exit)
    # the real one ends every child of this process: pytest's, not the hook's (real-process tests)
    stopped = []
    monkeypatch.setattr(preemption, 'stop_workers', lambda: stopped.append(1) or [])
    monkeypatch.delenv(preemption.EXIT_CODE_FILE_ENV, raising=False)
    monkeypatch.delenv('RANK', raising=False)
    return stopped


@pytest.fixture
def restore_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_registered():
    assert HOOKS.get('PreemptionHook') is PreemptionHook
    assert PREEMPTED_EXIT_CODE == 143 and PreemptionHook.priority == 'LOWEST'


def test_before_train_installs_the_handler_and_clears_an_old_marker(tmp_path, restore_signals):
    (tmp_path / PREEMPTED_MARKER).write_text('5\n')
    hook = PreemptionHook()
    hook.before_train(_runner(tmp_path, 0))
    assert not (tmp_path / PREEMPTED_MARKER).exists()
    assert hook.received is None
    os.kill(os.getpid(), signal.SIGUSR1)  # the real signal, handled by the hook
    assert hook.received == 'SIGUSR1'
    hook.received = None
    os.kill(os.getpid(), signal.SIGTERM)
    assert hook.received == 'SIGTERM'


def test_preemption_hook_takes_over_a_held_signal(tmp_path, restore_signals):
    held_signals.hold()
    os.kill(os.getpid(), signal.SIGTERM)
    hook = PreemptionHook()
    hook.before_train(_runner(tmp_path, 0))
    assert hook.received == 'SIGTERM' and held_signals.take() is None  # acted on after a step
    assert signal.getsignal(signal.SIGTERM) == hook._handle


def test_no_signal_does_nothing(tmp_path, exits):
    hook, runner = PreemptionHook(), _runner(tmp_path, 3)
    hook.after_train_iter(runner, 3)
    hook.after_train_epoch(runner)
    assert runner.hooks[1].calls == [] and runner.logger.lines == []
    assert not (tmp_path / PREEMPTED_MARKER).exists()


def test_signal_mid_epoch_saves_the_iteration_writes_the_marker_and_exits_143(tmp_path, exits,
                                                                              monkeypatch):
    outer = tmp_path / 'exit_code'
    monkeypatch.setenv('TRAIN_EXIT_CODE_FILE', str(outer))
    hook, runner = PreemptionHook(), _runner(tmp_path, 3)  # iteration 4 of a 10-step epoch
    hook._handle(signal.SIGTERM, None)
    with pytest.raises(SystemExit) as exit_info:
        hook.after_train_iter(runner, 3)
    assert exit_info.value.code == 143 and exits == [1]  # the workers were ended first
    assert runner.hooks[1].calls == [('iter', 4)]
    assert (tmp_path / PREEMPTED_MARKER).read_text() == '4\n'
    assert outer.read_text() == '143\n'  # what tools/dist_train.sh exits with
    assert runner.logger.lines == [f'SIGTERM: saved {tmp_path}/iter_4.pth after iteration 4; '
                                   'exiting with 143 (resume with --resume)']


def test_signal_on_the_last_step_of_an_epoch_waits_for_the_epoch_end(tmp_path, exits):
    hook, runner = PreemptionHook(), _runner(tmp_path, 9)  # iteration 10 of 10
    hook._handle(signal.SIGUSR1, None)
    hook.after_train_iter(runner, 9)  # nothing yet: the epoch's own work runs first
    assert runner.hooks[1].calls == []
    runner.iter = 10  # mmengine's loop counts the step before the epoch ends
    with pytest.raises(SystemExit) as exit_info:
        hook.after_train_epoch(runner)
    assert exit_info.value.code == 143
    assert runner.hooks[1].calls == [('epoch', 1)]
    assert (tmp_path / PREEMPTED_MARKER).read_text() == '10\n'
    assert runner.logger.lines == [f'SIGUSR1: saved {tmp_path}/epoch_1.pth after iteration 10; '
                                   'exiting with 143 (resume with --resume)']


def test_only_rank_0_writes_the_work_dir_marker(tmp_path, exits, monkeypatch):
    monkeypatch.setenv('RANK', '1')
    monkeypatch.setenv('LOCAL_RANK', '1')
    monkeypatch.setenv('TRAIN_EXIT_CODE_FILE', str(tmp_path / 'exit_code'))
    hook, runner = PreemptionHook(), _runner(tmp_path, 2)
    hook._handle(signal.SIGTERM, None)
    with pytest.raises(SystemExit):
        hook.after_train_iter(runner, 2)
    assert runner.hooks[1].calls == [('iter', 3)]  # every process saves (collective write)
    assert not (tmp_path / PREEMPTED_MARKER).exists()
    assert not (tmp_path / 'exit_code').exists()  # local rank 0 tells the launcher


def test_a_distributed_run_agrees_once_per_logging_interval(tmp_path, exits, monkeypatch):
    """Several processes agree through a collective (the host waits for its result): only on
    the iterations that log, here every 4th, and at the epoch's end; one process reads its
    flag every iteration (free)."""
    from mmengine.hooks import LoggerHook
    agreements = []
    monkeypatch.setattr(preemption.dist, 'distributed', lambda: True)
    monkeypatch.setattr(preemption.dist, 'any_process',
                        lambda flag: agreements.append(flag) or flag)
    hook, runner = PreemptionHook(), _runner(tmp_path, 0)
    runner.hooks.append(LoggerHook(interval=4))
    hook._every = preemption.logger_interval(runner)
    hook._handle(signal.SIGTERM, None)
    for i in range(2):
        runner.iter = i
        hook.after_train_iter(runner, i)  # iterations 1 and 2: no collective
    assert agreements == [] and runner.hooks[1].calls == []
    runner.iter = 3
    with pytest.raises(SystemExit):
        hook.after_train_iter(runner, 3)  # iteration 4 logs: agreed, saved, exited
    assert agreements == [True] and runner.hooks[1].calls == [('iter', 4)]


def test_before_train_makes_the_training_loaders_workers_leave_signals_to_the_trainer(
        tmp_path, restore_signals):
    """The training loader's worker_init_fn is wrapped (mmengine's seeding still runs inside);
    a loader without workers is left alone."""
    import torch
    from torch.utils.data import DataLoader

    from benchmark.data.worker_signals import WorkerSignals
    seeding = object()
    loader = DataLoader(torch.arange(4), num_workers=1, worker_init_fn=seeding)
    runner = _runner(tmp_path, 0)
    runner.train_dataloader = loader
    PreemptionHook().before_train(runner)
    assert isinstance(loader.worker_init_fn, WorkerSignals) and loader.worker_init_fn.inner is seeding
    PreemptionHook().before_train(runner)  # a second hook does not wrap it twice
    assert loader.worker_init_fn.inner is seeding
    plain = DataLoader(torch.arange(4), num_workers=0)
    runner.train_dataloader = plain
    PreemptionHook().before_train(runner)
    assert plain.worker_init_fn is None


def test_the_hooks_refuse_their_arguments_in_one_line_naming_them():
    """What the config check turns into a line naming the key: the hooks' own refusals."""
    for build, words in [
            (lambda: PreemptionHook(signals=['SIGTREM']), "unknown signal 'SIGTREM'"),
            (lambda: PreemptionHook(signals='SIGTERM'), 'a list of signal names'),
            (lambda: SafeCheckpointHook(interval=0), 'interval must be >= 1, or -1'),
            (lambda: SafeCheckpointHook(max_keep_ckpts=-2), 'max_keep_ckpts must be >= 1, or -1'),
            (lambda: SafeCheckpointHook(rule='most'), "rule must be 'greater', 'less' or None"),
            (lambda: SafeCheckpointHook(filename_tmpl='e.pth'), "filename_tmpl must hold '{}'"),
            (lambda: SafeCheckpointHook(intervall=1), "unexpected keyword argument 'intervall'")]:
        with pytest.raises((ValueError, TypeError)) as err:
            build()
        assert words in str(err.value) and '\n' not in str(err.value), str(err.value)
    SafeCheckpointHook(interval=-1, max_keep_ckpts=3, rule='less', filename_tmpl='e_{}.pth')


def test_a_process_tells_its_own_error_line_whatever_its_rank_and_the_first_one_stays(
        tmp_path, monkeypatch):
    """An error one process alone met (rank 1's bad file) reaches tools/dist_train.sh from that
    process; a process that fails after it (its collective broken) cannot replace it."""
    told = tmp_path / 'exit_code'
    monkeypatch.setenv('TRAIN_EXIT_CODE_FILE', str(told))
    monkeypatch.setenv('LOCAL_RANK', '1')
    assert not preemption.launcher_told()
    preemption.tell_launcher(2, 'error: x.py: a.JPEG: truncated image file')
    assert preemption.launcher_told()
    monkeypatch.setenv('LOCAL_RANK', '0')
    preemption.tell_launcher(143)
    preemption.tell_launcher(3, 'error: training diverged')
    assert told.read_text() == '2\nerror: x.py: a.JPEG: truncated image file\n'
    monkeypatch.delenv('TRAIN_EXIT_CODE_FILE')
    assert not preemption.launcher_told()
