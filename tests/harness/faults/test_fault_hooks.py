"""KillHook / PoisonHook fire at exactly the configured moment on the configured rank.

Nothing is killed here: the kill, the signal and the timer are replaced by recorders.
"""
import signal
from types import SimpleNamespace

import pytest
import torch
from mmengine.registry import HOOKS

from benchmark.harness.faults import hooks as fault_hooks
from benchmark.harness.faults.hooks import KillHook, PoisonHook
from methods.base import EncoderModel


@pytest.fixture
def record(monkeypatch):
    """Every would-be kill, signal and timer, in order."""
    events = []
    monkeypatch.setattr(fault_hooks, '_kill_now', lambda: events.append('kill'))
    monkeypatch.setattr(fault_hooks.os, 'kill', lambda pid, sig: events.append(('signal', sig)))

    class Timer:
        def __init__(self, delay, fn):
            self.delay, self.fn = delay, fn

        def start(self):
            events.append(('timer', self.delay, self.fn))

    monkeypatch.setattr(fault_hooks.threading, 'Timer', Timer)
    monkeypatch.delenv('RANK', raising=False)
    return events


def _steps(hook, n, runner):
    for i in range(n):
        runner.iter = i
        hook.before_train_iter(runner, i)
        hook.after_train_iter(runner, i)


def test_registered():
    assert HOOKS.get('KillHook') is KillHook and HOOKS.get('PoisonHook') is PoisonHook


def test_kill_after_the_chosen_iteration_only(record):
    runner = SimpleNamespace(iter=0)
    hook = KillHook(at_iter=3)
    for i in range(5):
        runner.iter = i
        hook.after_train_iter(runner, i)
        if i == 1:
            assert record == []
    assert record == ['kill']  # once: after iteration 3 (runner.iter 2)


def test_signal_as_the_chosen_iteration_starts(record):
    runner = SimpleNamespace(iter=0)
    _steps(KillHook(signal_at_iter=2, sig='SIGUSR1'), 4, runner)
    assert record == [('signal', signal.SIGUSR1)]


def test_kill_during_the_nth_save_and_during_eval(record):
    hook = KillHook(during_save=2, delay_s=0.25, during_eval=True)
    hook.before_save_checkpoint(None, {})
    assert record == []
    hook.before_save_checkpoint(None, {})
    hook.before_save_checkpoint(None, {})
    assert record == [('timer', 0.25, fault_hooks._kill_now)]
    hook.after_train(None)
    assert record[1] == ('timer', 0.25, fault_hooks._kill_now)


def test_other_ranks_are_left_alone(record, monkeypatch):
    monkeypatch.setenv('RANK', '1')
    runner = SimpleNamespace(iter=0)
    _steps(KillHook(at_iter=1, signal_at_iter=1, rank=0), 2, runner)
    assert record == []
    _steps(KillHook(at_iter=1, rank=1), 2, runner)
    assert record == ['kill']


def test_poison_fills_the_first_backbone_weight_with_nan_before_the_iteration(monkeypatch):
    monkeypatch.delenv('RANK', raising=False)
    torch.manual_seed(0)
    model = EncoderModel(backbone=dict(depth=18, small_stem=True))
    wrapped = SimpleNamespace(module=model)  # unwrapped like DDP
    runner = SimpleNamespace(iter=0, model=wrapped)
    hook = PoisonHook(at_iter=2)
    first = next(model.backbone.parameters())
    hook.before_train_iter(runner, 0)
    assert torch.isfinite(first).all()
    runner.iter = 1
    hook.before_train_iter(runner, 1)
    assert torch.isnan(first).all()
    others = list(model.backbone.parameters())[1:]
    assert all(torch.isfinite(p).all() for p in others)
    monkeypatch.setenv('RANK', '1')
    other = EncoderModel(backbone=dict(depth=18, small_stem=True))
    PoisonHook(at_iter=2).before_train_iter(SimpleNamespace(iter=1, model=other), 1)
    assert torch.isfinite(next(other.backbone.parameters())).all()  # rank 0's hook only
