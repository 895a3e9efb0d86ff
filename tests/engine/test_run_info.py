"""RunInfoHook: the run's facts (world size, total batch, epoch time, memory) in checkpoint meta."""
import resource
from types import SimpleNamespace

import pytest
import torch
from mmengine.registry import HOOKS

from benchmark.engine import run_info
from benchmark.engine.run_info import RunInfoHook, peak_memory_gb


def _runner(world_size=2, batch_size=8):
    return SimpleNamespace(world_size=world_size,
                           train_dataloader=SimpleNamespace(batch_size=batch_size))


def test_registered_with_high_priority():
    assert HOOKS.get('RunInfoHook') is RunInfoHook
    assert RunInfoHook.priority == 'HIGH'  # before the checkpoint hook saves an epoch


def test_peak_memory_on_cpu_is_the_max_rss_in_gb():
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        pytest.skip('CUDA in use: the CUDA measure applies')
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    memory, kind = peak_memory_gb()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    assert kind == 'cpu-max-rss' and before <= memory <= after


def test_info_total_batch_and_mean_epoch_time():
    hook = RunInfoHook()
    hook.epoch_seconds = [10.0, 20.0, 33.0]
    info = hook.info(_runner(world_size=3, batch_size=8))
    assert info['world_size'] == 3 and info['total_batch'] == 24
    assert info['epoch_seconds'] == [10.0, 20.0, 33.0]
    assert info['time_s_per_epoch'] == 21.0
    assert info['memory_kind'] in ('cpu-max-rss', 'cuda-max-allocated')
    assert info['peak_memory_gb'] > 0
    assert RunInfoHook().info(_runner())['time_s_per_epoch'] is None  # no epoch timed yet


def test_epochs_are_timed_by_the_clock(monkeypatch):
    clock = iter([100.0, 112.5, 200.0, 207.0])
    monkeypatch.setattr(run_info.time, 'perf_counter', lambda: next(clock))
    hook, runner = RunInfoHook(), _runner()
    hook.after_train_epoch(runner)  # no epoch started: nothing recorded
    for _ in range(2):
        hook.before_train_epoch(runner)
        hook.after_train_epoch(runner)
    assert hook.epoch_seconds == [12.5, 7.0]
    assert hook.info(runner)['time_s_per_epoch'] == 9.75


def test_checkpoint_round_trip_keeps_the_epoch_times():
    hook = RunInfoHook()
    hook.epoch_seconds = [4.0, 6.0]
    checkpoint = {'meta': {'epoch': 2}}
    hook.before_save_checkpoint(_runner(world_size=2, batch_size=16), checkpoint)
    meta = checkpoint['meta']
    assert meta['epoch'] == 2  # existing meta kept
    assert (meta['world_size'], meta['total_batch'], meta['epoch_seconds'],
            meta['time_s_per_epoch']) == (2, 32, [4.0, 6.0], 5.0)
    resumed = RunInfoHook()
    resumed.after_load_checkpoint(None, checkpoint)
    assert resumed.epoch_seconds == [4.0, 6.0]
    resumed.epoch_seconds.append(1.0)  # a copy, not the checkpoint's list
    assert meta['epoch_seconds'] == [4.0, 6.0]
    fresh = {}
    RunInfoHook().before_save_checkpoint(_runner(), fresh)
    assert fresh['meta']['total_batch'] == 16
    old = RunInfoHook()
    old.after_load_checkpoint(None, {})  # a checkpoint from before the hook
    assert old.epoch_seconds == []


def test_images_trained_count_every_iterations_samples_across_a_resume():
    hook, runner = RunInfoHook(), _runner(world_size=2, batch_size=8)
    for size in (8, 8, 5):  # the last batch of an epoch without drop_last
        hook.after_train_iter(runner, 0, dict(inputs=None, data_samples=list(range(size))))
    hook.after_train_iter(runner, 0, None)  # no batch handed over: the loader's batch size
    checkpoint = {'meta': {'iter': 4}}
    hook.before_save_checkpoint(runner, checkpoint)
    assert checkpoint['meta']['images_trained'] == 29
    resumed = RunInfoHook()
    resumed.after_load_checkpoint(runner, checkpoint)
    resumed.after_train_iter(runner, 0, dict(data_samples=[0] * 8))
    assert resumed.info(runner)['images_trained'] == 37
    old = RunInfoHook()
    old.after_load_checkpoint(runner, {'meta': {'iter': 12, 'epoch': 3}})  # trained, uncounted
    old.after_train_iter(runner, 0, dict(data_samples=[0] * 8))
    assert old.info(runner)['images_trained'] is None
    fresh = RunInfoHook()
    fresh.after_load_checkpoint(runner, {'meta': {'iter': 0}})  # nothing trained before
    assert fresh.images_trained == 0
