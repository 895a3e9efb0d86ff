"""Where a demo run's time goes: a digits run as `make demo` runs it (one process, batch 64, one
torch thread, pinned to one core: each of the demo's two side-by-side runs gets one), timed by
part, with its views drawn in three ways, run in turn (A B C, C B A, ...):

- ``pil-worker``: lightly's PIL transform in one loader worker, which shares the run's core;
- ``pil-main``: the same transform in the training process (no loader worker);
- ``batched``: the configs' own; the loader hands out the 8x8 uint8 arrays and the model's
  `GPUViewPreprocessor` draws every image's two views in batches of tensors.

Per epoch: the model step (forward, backward, SGD, the online probe's feature hook), the data
preprocessor (drawing the views in ``batched``, else moving the batch), the loader (the epoch
outside the step and the hooks: its work in the training process, or waiting for its worker),
the online probe's own steps and per-epoch validation, the checkpoint, the kNN monitor (run
every epoch here to time it; the configs run it every 5th) and the other hooks. Medians over
the epochs after the first (which starts the worker and warms up). Then, once per method,
the default evaluation: feature extraction and each protocol. A run's projection is the
config's epochs of those parts, the kNN monitor on its own epochs, and the evaluation; the
demo's is one MoCo-v2 and one MixCo run one after the other (two slots side by side, each
running one of each), assuming the two slots do not slow each other.
"""
import functools
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, List

import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import DATASETS

from benchmark.engine.launch import load_config
from benchmark.engine.train_views import device_views
from benchmark.data.eval_input import eval_dataset_cfg
from benchmark.evaluation.features import extract_features
from benchmark.evaluation.protocols import run_protocols
from benchmark.harness.speed.timing import Settings, in_turn
from benchmark.names import DEFAULT_PROTOCOLS

ROOT = Path(__file__).resolve().parents[3]
DEMO_CONFIGS = {'mocov2': 'configs/mocov2_r18_digits.py', 'mixco': 'configs/mixco_r18_digits.py'}
DEMO_SUITE = ROOT / 'configs' / 'suites' / 'demo_digits.py'  # its cfg_options: batch, width
VARIANTS = ('pil-worker', 'pil-main', 'batched')
TIMED_HOOKS = ('OnlineLinearProbeHook', 'SafeCheckpointHook', 'KNNMonitorHook')
STAGES = ('before_train_epoch', 'before_train_iter', 'after_train_iter', 'after_train_epoch')
PARTS = ('model step', 'preprocessor', 'loader', *TIMED_HOOKS, 'other hooks', 'epoch')


def demo_options() -> dict:
    """The demo suite's overrides of its configs (one process with the configs' total batch,
    the encoder's width), read from the suite file so the part times what `make demo` runs."""
    return dict(Config.fromfile(str(DEMO_SUITE)).get('cfg_options') or {})


def variant_cfg(config: str, variant: str, epochs: int, work_dir: str):
    """The demo config as its suite runs it, for `epochs` epochs, views drawn as `variant` says;
    also the config's own epochs and kNN-monitor interval."""
    cfg = load_config(str(ROOT / config), demo_options(), work_dir)
    knn = next(h for h in cfg.custom_hooks if h['type'] == 'KNNMonitorHook')
    own = dict(epochs=cfg.train_cfg.max_epochs, knn_interval=knn.get('interval', 1))
    knn['interval'] = 1
    cfg.train_cfg.max_epochs = epochs
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend')]  # no wandb in a benchmark
    # a stop ends the harness (benchmark/stop.py), not this run as a pre-emption
    cfg.custom_hooks = [h for h in cfg.custom_hooks if h['type'] != 'PreemptionHook']
    cfg.update(experiment_name=f'{Path(config).stem}-{variant}', log_level='WARNING')
    if variant != 'batched':
        pre = device_views(cfg)
        if pre is None:
            raise ValueError(f'{config}: the demo part compares its batched views with the PIL '
                             'path; the config has no GPUViewPreprocessor')
        cfg.model.pop('data_preprocessor')
        loader = cfg.train_dataloader
        loader.dataset.view = pre['view']
        loader.num_workers = int(variant == 'pil-worker')
        loader.persistent_workers = variant == 'pil-worker'
    return cfg, own


class PartTimer:
    """Seconds per part and epoch, by wrapping the step, the preprocessor, the hooks' training
    stages and the epoch of one Runner."""

    def __init__(self, runner) -> None:
        self.epochs: List[Dict[str, float]] = []
        self.now: Dict[str, float] = defaultdict(float)
        model = runner.model
        self._wrap(model, 'train_step', 'step')
        self._wrap(model.data_preprocessor, 'forward', 'preprocessor')
        for hook in runner.hooks:
            name = type(hook).__name__
            for stage in STAGES:
                if getattr(type(hook), stage) is not getattr(Hook, stage):
                    self._wrap(hook, stage, name if name in TIMED_HOOKS else 'other hooks')
        self._wrap(runner.train_loop, 'run_epoch', 'epoch', self._close_epoch)

    def _wrap(self, obj, name: str, key: str, then: Callable[[], None] = lambda: None) -> None:
        fn = getattr(obj, name)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.now[key] += time.perf_counter() - start
                then()
        setattr(obj, name, timed)

    def _close_epoch(self) -> None:
        t = dict(self.now)
        pre = t.get('preprocessor', 0.0)  # inside the step: counted once, as its own part
        hooks = sum(t.get(k, 0.0) for k in (*TIMED_HOOKS, 'other hooks'))
        parts = {'model step': t['step'] - pre, 'preprocessor': pre,
                 'loader': t['epoch'] - t['step'] - hooks,
                 **{k: t.get(k, 0.0) for k in (*TIMED_HOOKS, 'other hooks')}, 'epoch': t['epoch']}
        self.epochs.append(parts)
        self.now.clear()


def time_evaluation(runner, cfg, figure: str) -> Dict[str, float]:
    """Seconds of the default evaluation: features of both splits, then each protocol."""
    data, backbone = eval_dataset_cfg(cfg), runner.model.backbone
    cls, feats, out = DATASETS.get(data['type']), {}, {}
    start = time.perf_counter()
    for split in ('train', 'val'):
        dataset = cls(data_root=data['data_root'], split=split, input_size=data['input_size'],
                      view='test')
        feats[split] = extract_features(backbone, dataset, 256, 0, device=torch.device('cpu'))
    out['features'] = time.perf_counter() - start
    for protocol in DEFAULT_PROTOCOLS:
        start = time.perf_counter()
        run_protocols(feats['train'], feats['val'], len(dataset.classes), [protocol],
                      figure_path=figure)
        out[protocol] = time.perf_counter() - start
    return out


def summarize(epochs: List[Dict[str, float]], own: dict) -> dict:
    """Per-epoch medians (after the first epoch), the kNN monitor's cost per call, and the
    projected seconds of one run (before its evaluation)."""
    kept = epochs[1:] or epochs
    per_epoch = {p: statistics.median(e[p] for e in kept) for p in PARTS}
    knn = per_epoch['KNNMonitorHook']
    calls = own['epochs'] // own['knn_interval']
    train = own['epochs'] * (per_epoch['epoch'] - knn) + calls * knn
    return dict(per_epoch=per_epoch, knn_per_call=knn, knn_calls=calls, projected_train=train)


def bench_demo(s: Settings, log: Callable[[str], None] = print) -> dict:
    """Each demo method under each views variant, `s.demo_rounds` times in turn, pinned to one
    core; the evaluation once per method; projections per variant."""
    from mmengine.runner import Runner
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else []
    runs: Dict[str, Dict[str, List[dict]]] = {m: {v: [] for v in VARIANTS} for m in DEMO_CONFIGS}
    evaluation, own = {}, {}
    if cores:
        os.sched_setaffinity(0, cores[:1])  # the demo's slot: one core, its worker on it too
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(s.demo_rounds):
                for method, config in DEMO_CONFIGS.items():
                    for variant in in_turn(list(VARIANTS), r):
                        log(f'  demo: {method} {variant} (round {r + 1}) ...')
                        work = f'{tmp}/{method}-{variant}-{r}'
                        cfg, own[method] = variant_cfg(config, variant, s.demo_epochs, work)
                        runner = Runner.from_cfg(cfg)
                        timer = PartTimer(runner)
                        runner.train()
                        runs[method][variant].append(timer.epochs)
                        if method not in evaluation:
                            evaluation[method] = time_evaluation(runner, cfg, f'{work}/t.png')
                        del runner
    finally:
        if cores:
            os.sched_setaffinity(0, cores)
    out = dict(cpu_cores_pinned=1, epochs=s.demo_epochs, rounds=s.demo_rounds, methods={})
    for method, variants in runs.items():
        m = out['methods'][method] = dict(config=DEMO_CONFIGS[method], own=own[method],
                                          evaluation=evaluation[method], variants={})
        for variant, rounds in variants.items():
            v = m['variants'][variant] = summarize([e for r in rounds for e in r], own[method])
            v['projected_run'] = v['projected_train'] + sum(evaluation[method].values())
    out['projected_demo'] = {v: sum(m['variants'][v]['projected_run']
                                    for m in out['methods'].values()) for v in VARIANTS}
    return out


def demo_table(demo: dict) -> List[str]:
    """Markdown: seconds per epoch by part and variant, per method; projections."""
    options = ', '.join(f'{key}={value}' for key, value in demo_options().items())
    lines = [f'Demo run by part (one core, one torch thread, {options}; medians over '
             f'epochs 2-{demo["epochs"]} of {demo["rounds"]} round(s)), seconds per epoch:', '']
    for method, m in demo['methods'].items():
        lines += [f'| {method} | ' + ' | '.join(VARIANTS) + ' |', '|---' * (len(VARIANTS) + 1)
                  + '|']
        for part in PARTS:
            lines.append(f'| {part} | ' + ' | '.join(
                f'{m["variants"][v]["per_epoch"][part]:.2f}' for v in VARIANTS) + ' |')
        lines.append('| projected run (min) | ' + ' | '.join(
            f'{m["variants"][v]["projected_run"] / 60:.1f}' for v in VARIANTS) + ' |')
        ev = m['evaluation']
        lines += ['', f'{method} evaluation (s): ' + ', '.join(
            f'{k} {v:.1f}' for k, v in ev.items()) + f'; total {sum(ev.values()):.1f}.', '']
    lines.append('Projected demo (one MoCo-v2 and one MixCo run after each other per slot), '
                 'min: ' + ', '.join(f'{v} {t / 60:.1f}' for v, t in
                                     demo['projected_demo'].items()) + '.')
    return lines
