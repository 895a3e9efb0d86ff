"""A training iteration that does not log reads nothing back from the device: every host read
of a tensor (`.item()`, `.tolist()`, `bool()`, `float()`, `torch.equal`, ...) and every copy to
a device that waits (`.to(device)` without ``non_blocking``) during a real mmengine run is
counted, per iteration, with the suite's hooks and the online probe on."""
import json

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

import benchmark.components  # noqa: F401  registers the hooks, Digits and the models
from benchmark.engine.launch import load_config
from benchmark.engine.deferred_log import DeferredRuntimeInfoHook
from benchmark.engine.nan_guard import NaNGuardHook
from tests.conftest import ROOT

LOG_INTERVAL, SAVE_AT, ITERATIONS = 4, 6, 12
READS = ('item', 'tolist', '__bool__', '__float__', '__int__', '__index__', 'numpy', 'cpu')


def _cfg(tmp_path, method: str) -> Config:
    cfg = load_config(str(ROOT / f'configs/{method}_r18_digits.py'))
    cfg.merge_from_dict({'train_dataloader.batch_size': 8, 'train_dataloader.num_workers': 0,
                         'train_dataloader.persistent_workers': False,
                         'train_dataloader.num_batch_per_epoch': ITERATIONS,
                         'train_cfg.max_epochs': 1, 'model.queue_size': 32,
                         'default_hooks.logger.interval': LOG_INTERVAL,
                         'default_hooks.checkpoint.interval': 100,
                         'default_hooks.checkpoint.save_last': False,
                         'default_hooks.checkpoint.iter_interval': SAVE_AT})
    # The config's device views: the preprocessor's work is counted with the step's.
    cfg.custom_hooks = [dict(type='RunInfoHook'),
                        dict(type='OnlineLinearProbeHook', num_test=16, batch_size=16),
                        dict(type='NaNGuardHook'), dict(type='PreemptionHook')]
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend')]
    cfg.work_dir, cfg.log_level = str(tmp_path / method), 'WARNING'
    cfg.experiment_name = f'syncs-{method}-{tmp_path.name}'
    return cfg


def _reads_per_iteration(tmp_path, monkeypatch, method: str) -> dict:
    """{iteration: host reads of tensors between its first hook and its last} of a real run."""
    counts, counting = {}, []

    def counted(name, real):
        def read(*args, **kwargs):
            if counting and not any(a is seeds[-1] for a in args[:1]):
                counts[counting[-1]] = counts.get(counting[-1], 0) + 1
                calls.append((counting[-1], name))
            return real(*args, **kwargs)
        return read

    calls, seeds = [], [None]  # the batch's sample seeds: host data from the sampler, read there
    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
    monkeypatch.setattr(torch, 'equal', counted('equal', torch.equal))
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):  # a copy to a device that is not non_blocking waits too
        device = kwargs.get('device', args[0] if args else None)
        if (counting and isinstance(device, (str, torch.device))
                and not kwargs.get('non_blocking', False)):
            counts[counting[-1]] = counts.get(counting[-1], 0) + 1
            calls.append((counting[-1], 'blocking to'))
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, 'to', to)
    runner = Runner.from_cfg(_cfg(tmp_path, method))
    loop = runner.train_loop
    run_iter = loop.run_iter

    def counted_iter(idx, data_batch):
        counting.append(runner.iter + 1)  # the batch is loaded; the views are drawn in the step
        seeds.append(data_batch['seed'])
        try:
            run_iter(idx, data_batch)
        finally:
            counting.pop()

    loop.run_iter = counted_iter
    runner.train()
    assert runner.iter == ITERATIONS
    return counts, calls


@pytest.mark.parametrize('method', ['mixco', 'imix'])
def test_no_host_read_outside_logging_and_checkpoint_iterations(tmp_path, monkeypatch,
                                                                tiny_backbones, method):
    """MixCo (the probe takes the features of its joint pass) and i-Mix (the probe runs its own
    pass): zero reads on iterations that neither log nor save; the logging ones do read (the
    counter sees the log variables and the NaN guard's check)."""
    counts, calls = _reads_per_iteration(tmp_path, monkeypatch, method)
    reading = {i for i in range(1, ITERATIONS + 1) if i % LOG_INTERVAL == 0 or i == SAVE_AT}
    quiet = {i: counts.get(i, 0) for i in range(1, ITERATIONS + 1) if i not in reading}
    assert quiet == {i: 0 for i in quiet}, [c for c in calls if c[0] in quiet]
    assert all(counts.get(i, 0) > 0 for i in range(LOG_INTERVAL, ITERATIONS + 1, LOG_INTERVAL))


def test_the_deferred_hooks_are_the_runs_own(tmp_path, tiny_backbones):
    """The suite's runtime config uses the deferred runtime-info hook; both deferred hooks
    follow the LoggerHook's interval."""
    runner = Runner.from_cfg(_cfg(tmp_path, 'mixco'))
    hooks = {type(h) for h in runner.hooks}
    assert DeferredRuntimeInfoHook in hooks and NaNGuardHook in hooks
    runner.train()
    for hook in runner.hooks:
        if isinstance(hook, (DeferredRuntimeInfoHook, NaNGuardHook)):
            assert hook._every == LOG_INTERVAL


def _train_logs(tmp_path, runtime_info: str) -> tuple:
    cfg = _cfg(tmp_path / runtime_info, 'mixco')
    cfg.default_hooks.runtime_info = dict(type=runtime_info)
    cfg.experiment_name += runtime_info
    runner = Runner.from_cfg(cfg)
    runner.train()
    scalars = {k: v.data for k, v in runner.message_hub.log_scalars.items()
               if k.startswith('train/') and k not in ('train/time', 'train/data_time')}
    logged = (tmp_path / runtime_info).rglob('scalars.json')
    rows = [{k: v for k, v in json.loads(line).items() if k not in ('time', 'data_time')}
            for line in next(logged).read_text().splitlines()]
    return scalars, rows


def test_the_logs_are_mmengines(tmp_path, tiny_backbones):
    """The same run with mmengine's RuntimeInfoHook and with the deferred one: the message hub
    holds the same values in the same order, and the logged (smoothed) lines are equal."""
    theirs, their_rows = _train_logs(tmp_path, 'RuntimeInfoHook')
    ours, our_rows = _train_logs(tmp_path, 'DeferredRuntimeInfoHook')
    assert set(ours) == set(theirs) and 'train/loss_mix' in ours
    for key, (values, counts) in theirs.items():
        assert len(values) == ITERATIONS
        assert np.array_equal(ours[key][0], values) and np.array_equal(ours[key][1], counts), key
    assert our_rows == their_rows
    assert len([r for r in our_rows if 'loss' in r]) == ITERATIONS // LOG_INTERVAL
