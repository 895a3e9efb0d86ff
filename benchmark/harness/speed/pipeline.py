"""The real pipeline: MoCo-v2 and MixCo through the mmengine Runner on a generated Tiny-ImageNet
folder, per configuration of views (PIL in the loader workers, or drawn on the device) and
precision (fp32, or bf16 with channels_last), next to bare steps of the same model and batch."""
import gc
import json
import math
import shutil
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional

import torch
from mmengine.config import Config
from mmengine.hooks import Hook

from benchmark import dist
from benchmark.cli import one_line
from benchmark.engine.channels_last import use_channels_last_wrapper
from benchmark.engine.launch import pin_batches
from benchmark.engine.prefetch_loop import use_prefetch_loop
from benchmark.engine.step_graph import StepGraph, whole_step
from benchmark.engine.train_views import fill_view_size
from benchmark.harness.speed.breakdown import (Clock, Counted, Marks, PrepareTimer, Profiled,
                                               SyncCount, summarise)
from benchmark.harness.speed.floor import achieved
from benchmark.harness.speed.step import PRECISIONS, model_cfg, step_inputs, train_step
from benchmark.harness.speed.timing import (Settings, in_turn, own_bytes, paired_ratio,
                                      step_peak_bytes, sync, timed)

PIPELINE_METHODS = ('mocov2', 'mixco')
# Config overrides (--cfg-options form, merged into the pipeline's config) of each view variant.
VIEWS_OPTIONS: Dict[str, dict] = {
    'pil': {},  # PIL views in the loader workers (the paper configs)
    # views on the device, as the configs draw them on CUDA by default: the views of each
    # full batch replay a CUDA graph, drawn one batch ahead on a side stream while the step runs
    'gpu': {'train_dataloader.dataset.view': 'raw_uint8',
            'model.data_preprocessor': dict(type='GPUViewPreprocessor', view='mocov2',
                                            graph='auto', prefetch='auto')},
    # the same in plain calls after the step: no graph, no side stream
    'gpue': {'train_dataloader.dataset.view': 'raw_uint8',
             'model.data_preprocessor': dict(type='GPUViewPreprocessor', view='mocov2',
                                             graph=False, prefetch=False)},
    'gpuc': {'train_dataloader.dataset.view': 'raw_uint8',  # the same, torch.compile'd
             'model.data_preprocessor': dict(type='GPUViewPreprocessor', view='mocov2',
                                             compile=True, graph='auto', prefetch='auto')},
}
# The last one measures torch.compile on the fastest eager configuration (kept only if it wins).
PAPER_GRID = ('pil-fp32', 'pil-bf16-cl', 'gpu-fp32', 'gpu-bf16-cl', 'gpu-bf16-cl-compile')
WAIT_BOUND, EFFICIENCY_BOUND = 0.10, 0.90  # see `bound`
# Hooks of the configs no harness Runner runs: the kNN monitor (epoch-end work) and
# PreemptionHook, which would take a stop for a pre-emption of that Runner (save, exit 143)
# where Ctrl-C or SIGTERM stops the whole tool (benchmark/stop.py).
LEFT_OUT = ('KNNMonitorHook', 'PreemptionHook')


def config_name(s: Settings) -> str:
    """'pil-fp32', 'gpu-bf16-cl', 'gpu-bf16-cl-compile', ...: views, precision, '-cl' for
    channels_last, '-compile' for torch.compile, '-graph' for the step graph (StepGraphHook)."""
    return (f'{s.views}-{s.precision}{"-cl" if s.channels_last else ""}'
            f'{"-compile" if s.compile else ""}{"-graph" if s.step_graph else ""}')


def config_settings(s: Settings, name: str) -> Settings:
    """The settings with the views, precision, layout, compilation and step graph a
    configuration name spells."""
    parts = name.split('-')
    flags = parts[2:]
    order = ['cl', 'compile', 'graph']
    if (len(parts) < 2 or parts[0] not in VIEWS_OPTIONS or parts[1] not in PRECISIONS
            or len(set(flags)) != len(flags) or not set(flags) <= set(order)
            or flags != sorted(flags, key=order.index)):
        raise ValueError(f'pipeline configuration {name!r}: want '
                         f'VIEWS-PRECISION[-cl][-compile][-graph] with VIEWS in '
                         f'{sorted(VIEWS_OPTIONS)}, PRECISION in {sorted(PRECISIONS)}')
    return replace(s, views=parts[0], precision=parts[1], channels_last='cl' in flags,
                   compile='compile' in flags, step_graph='graph' in flags)


def bound(wait: float, efficiency: float) -> str:
    """What limits the end-to-end rate: 'data' (the step waits for the loader >= 10% of the
    time), else 'compute' (>= 90% of the bare step's rate), else 'overhead' (neither: hooks,
    host syncs, and on the device path the view drawing, which the bare step leaves out)."""
    if wait >= WAIT_BOUND:
        return 'data'
    return 'compute' if efficiency >= EFFICIENCY_BOUND else 'overhead'


class MeasuredEnough(Exception):
    """Raised by ThroughputHook after the last iteration it times."""


class ThroughputHook(Hook):
    """Time the pipeline's iterations after warm-up, without waiting for the device in between
    (it is drained once before the first timed iteration and once after the last); break each
    iteration down (`benchmark.harness.speed.breakdown`); then count one more iteration's
    operations and stop.

    Args:
        warmup: Untimed iterations first.
        iterations: Timed ones after them.
        device: Where the model runs.
        marks: The run's `Marks` hook (registered beside this one).
        profile: Profile one more iteration after the counted one (torch.profiler tables in
            `breakdown`).
    """

    priority = 'LOWEST'  # after_train_iter stamps the time after every other hook's work

    def __init__(self, warmup: int, iterations: int, device: torch.device,
                 marks: Marks, profile: bool = False,
                 prepared: Optional[PrepareTimer] = None) -> None:
        self.warmup, self.iterations, self.device, self.marks = warmup, iterations, device, marks
        self.prepared = prepared
        self.done = 0
        self.waits: List[float] = []  # IterTimerHook's data_time of the timed iterations
        self.window = (0.0, 0.0)
        self.syncs, self.counted = SyncCount(device), Counted()
        self.profiled = Profiled() if profile else None
        self.profile: Optional[dict] = None
        self.counts: Optional[dict] = None
        self.last_batch = None
        self.epoch_peak_bytes: Optional[int] = None

    def before_train_epoch(self, runner) -> None:
        if self.device.type == 'cuda':
            torch.cuda.reset_peak_memory_stats(self.device)

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        if self.done == self.warmup + self.iterations:  # the counted one, from its batch on
            self.counted.start()
        elif self.profiled and self.done == self.warmup + self.iterations + 1:
            self.profiled.start()  # then the profiled one

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.marks.end('end')
        self.done += 1
        self.last_batch = data_batch
        timed = self.done - self.warmup  # 1..iterations: a timed one
        if 1 <= timed <= self.iterations:
            self.waits.append(runner.message_hub.get_scalar('train/data_time').current())
        if timed == 0 or timed == self.iterations:
            sync(self.device)
            now = time.perf_counter()
            if timed == 0:
                self.window = (now, now)
                self.syncs.__enter__()
            else:
                self.syncs.__exit__(None, None, None)
                self.window = (self.window[0], now)
                if self.device.type == 'cuda':
                    self.epoch_peak_bytes = torch.cuda.max_memory_allocated(self.device)
        elif timed == self.iterations + 1:
            self.counts = self.counted.stop()
            if not self.profiled:
                raise MeasuredEnough
        elif timed == self.iterations + 2:
            self.profile = self.profiled.stop()
            raise MeasuredEnough

    def seconds(self) -> float:
        if self.done < self.warmup + self.iterations:
            raise ValueError(f'pipeline: {self.done} iterations ran, need {self.warmup} warm-up '
                             f'+ {self.iterations} timed; raise --images')
        return self.window[1] - self.window[0]

    def data_wait_fraction(self) -> float:
        """Share of the timed iterations' wall time spent waiting for the next batch."""
        return sum(self.waits) / self.seconds()

    def images_per_s(self, batch: int) -> float:
        return batch * self.iterations / self.seconds()

    def breakdown(self) -> dict:
        """ms per timed iteration: wait, views, step, hooks, rest, wall; host syncs counted in
        them (CUDA), and the counted iteration's aten operations and host reads."""
        first = self.warmup
        prepare = self.prepared.ms_per_iteration(self.window, self.iterations) \
            if self.prepared else 0.0
        out = summarise(self.marks, first, first + self.iterations,
                        1e3 * self.seconds() / self.iterations, [1e3 * w for w in self.waits],
                        prepare)
        return dict(ms=out, host_syncs=self.syncs.count, counted_iteration=self.counts,
                    **({'profile': self.profile} if self.profile else {}))


def bare_steps(runner, batch, s: Settings, device: torch.device, steps: int) -> dict:
    """Bare-step seconds and peak bytes of the runner's model on its last batch, workers idle."""
    model = dist.unwrap(runner.model)
    inputs = step_inputs(model.data_preprocessor(batch, True)['inputs'], s)
    opt, dtype = runner.optim_wrapper.optimizer, PRECISIONS[s.precision]
    seconds = [timed(lambda: train_step(model, opt, inputs, dtype), device)
               for _ in range(steps + 1)][1:]
    growth = step_peak_bytes(lambda: train_step(model, opt, inputs, dtype), device)
    return dict(seconds=seconds, own_bytes=own_bytes(model, opt, inputs),
                peak_bytes=own_bytes(model, opt, inputs) + growth,
                **(graphed_steps(model, opt, inputs, dtype, device, steps)
                   if device.type == 'cuda' else {}))


def graphed_steps(model, opt, inputs, dtype, device: torch.device, steps: int) -> dict:
    """Seconds of the whole step replayed from one CUDA graph (`StepGraph`), its eager form
    (`whole_step`) timed beside it, or why the capture failed (a string: the rest still runs)."""
    try:
        graph = StepGraph(model, opt, inputs, dtype)
        pairs = [(timed(lambda: whole_step(model, opt, inputs, dtype), device),
                  timed(lambda: graph(inputs), device)) for _ in range(steps + 1)][1:]
    except Exception as exc:  # a capture can fail on a real GPU: say why, keep the run
        return dict(graph_error=f'{type(exc).__name__}: {one_line(exc)[:300]}')
    finally:
        gc.collect()
        torch.cuda.empty_cache()
    return dict(whole_seconds=[e for e, _ in pairs], graph_seconds=[g for _, g in pairs])


def pipeline_cfg(method: str, s: Settings, data_root: str, work_dir: str, name: str) -> Config:
    """The method's config as tools/train.py runs it, on the fake data, for one epoch.

    Per-iteration hooks stay on (timer, logger at a large interval, scheduler, RunInfoHook);
    epoch-end work (checkpoint, kNN monitor) is outside the timed iterations and is left out,
    and so is the pre-emption hook: a stop ends the harness, not one Runner (`LEFT_OUT`).
    """
    cfg = model_cfg(method, s)
    loader = cfg.train_dataloader
    loader.batch_size = s.batch
    loader.dataset.update(data_root=data_root, input_size=s.input_size)
    if s.num_workers is not None:
        loader.num_workers = s.num_workers
    loader.persistent_workers = loader.persistent_workers and loader.num_workers > 0
    cfg.train_cfg.max_epochs = 1
    cfg.default_hooks.logger.interval = 10 ** 6  # logging every iteration is not the default
    cfg.default_hooks.checkpoint = None
    cfg.custom_hooks = [h for h in cfg.get('custom_hooks', []) if h['type'] not in LEFT_OUT]
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend')]  # no wandb in a benchmark
    cfg.update(work_dir=work_dir, experiment_name=name, log_level='WARNING', launcher='none')
    if s.precision == 'bf16':  # as configs/*_fast.py
        cfg.optim_wrapper.update(type='CPUCapableAmpOptimWrapper', dtype='bfloat16',
                                 loss_scale=dict(enabled=False))
    if s.channels_last:
        cfg.custom_hooks.append(dict(type='ChannelsLastHook'))
        use_channels_last_wrapper(cfg)  # as tools/train.py (one process: no DDP to wrap)
    if s.compile:  # the encoders (benchmark/engine/compile_hook.py); compiled in the warm-up
        cfg.custom_hooks.append(dict(type='CompileHook'))
    if s.step_graph:  # the step after the views replayed from one CUDA graph (eager on a CPU)
        cfg.custom_hooks.append(dict(type='StepGraphHook'))
    cfg.merge_from_dict(VIEWS_OPTIONS[s.views])
    cfg.pop('train_views', None)  # the configuration chooses the views
    pin_batches(cfg, torch.cuda.is_available())  # as tools/train.py
    fill_view_size(cfg)  # the device views' size follows the dataset's input_size
    use_prefetch_loop(cfg)  # as tools/train.py
    return cfg


def pipeline_block(method: str, s: Settings, device: torch.device, data_root: str,
                   work_dir: str, name: str) -> dict:
    """End-to-end images/s, data-wait share and memory of a fresh Runner, then bare steps."""
    from mmengine.runner import Runner
    runner = Runner.from_cfg(pipeline_cfg(method, s, data_root, work_dir, name))
    # after the timed ones: one counted, one profiled (with s.profile)
    timed = len(runner.train_dataloader) - s.pipeline_warmup - 1 - s.profile
    if s.pipeline_iters is not None:
        timed = min(timed, s.pipeline_iters)
    marks = Marks(Clock(device))
    prepared = PrepareTimer(dist.unwrap(runner.model).data_preprocessor)
    hook = ThroughputHook(s.pipeline_warmup, timed, device, marks, s.profile, prepared)
    runner.register_hook(marks)
    runner.register_hook(hook)
    try:
        runner.train()
    except MeasuredEnough:
        pass
    loader_iter = getattr(runner.train_dataloader, '_iterator', None)
    if loader_iter is not None and hasattr(loader_iter, '_shutdown_workers'):
        loader_iter._shutdown_workers()  # persistent workers would outlive the block
    marks.remove()
    out = dict(images_per_s=hook.images_per_s(s.batch), iterations=len(hook.waits),
               data_wait_fraction=hook.data_wait_fraction(), epoch_peak_bytes=hook.epoch_peak_bytes,
               breakdown=hook.breakdown(),
               **bare_steps(runner, hook.last_batch, s, device, max(3, s.repeats // 4)))
    del runner
    gc.collect()
    return out


def bench_pipeline(s: Settings, device: torch.device, data_root: str, tmp: str,
                   flops: Optional[Dict[str, float]] = None, peak: Optional[float] = None,
                   tag: str = '') -> dict:
    """Rounds of MoCo-v2 and MixCo epochs in turn under one configuration, and the summary."""
    keys = ('images_per_s', 'bare_images_per_s', 'efficiency', 'data_wait_fraction',
            'peak_bytes', 'epoch_peak_bytes')
    runs: Dict[str, dict] = {m: {k: [] for k in keys} for m in PIPELINE_METHODS}
    for r in range(s.pipeline_rounds):
        for m in in_turn(list(PIPELINE_METHODS), r):
            block = pipeline_block(m, s, device, data_root, f'{tmp}/work_{tag}{m}_{r}',
                                   f'{tag}{m}_{r}')
            bare_ips = s.batch / statistics.median(block['seconds'])
            run = runs[m]
            run['images_per_s'].append(block['images_per_s'])
            run['bare_images_per_s'].append(bare_ips)
            run['efficiency'].append(block['images_per_s'] / bare_ips)
            run['data_wait_fraction'].append(block['data_wait_fraction'])
            run['peak_bytes'].append(block['peak_bytes'])
            run['epoch_peak_bytes'].append(block['epoch_peak_bytes'])
            run.update(own_bytes=block['own_bytes'], iterations=block['iterations'])
            run.setdefault('breakdowns', []).append(block['breakdown'])
            if 'graph_seconds' in block:
                for k in ('whole', 'graph'):
                    run.setdefault(f'{k}_images_per_s', []).append(
                        s.batch / statistics.median(block[f'{k}_seconds']))
            elif 'graph_error' in block:
                run['graph_error'] = block['graph_error']
    for m, run in runs.items():
        run.update({f'median_{k}': statistics.median(run[k]) for k in keys[:5]})
        run['breakdown'] = median_breakdown(run['breakdowns'])
        if run.get('graph_images_per_s'):
            run.update({f'median_{k}_images_per_s': statistics.median(run[f'{k}_images_per_s'])
                        for k in ('whole', 'graph')})
            run['graph_speedup'] = paired_ratio(run['graph_images_per_s'],
                                                run['bare_images_per_s'])
        run['bound'] = bound(run['median_data_wait_fraction'], run['median_efficiency'])
        if flops:
            run['flops_per_image'] = flops[m]
            run.update(achieved(run['median_images_per_s'], flops[m], peak))
    new, base = runs['mixco'], runs['mocov2']
    out = dict(views=s.views, precision=s.precision, channels_last=s.channels_last, methods=runs,
               time_ratio=paired_ratio(base['images_per_s'], new['images_per_s']),
               bare_time_ratio=paired_ratio(base['bare_images_per_s'], new['bare_images_per_s']),
               memory_ratio=new['median_peak_bytes'] / base['median_peak_bytes'])
    if None not in new['epoch_peak_bytes'] + base['epoch_peak_bytes']:  # CUDA only
        out['epoch_memory_ratio'] = (statistics.median(new['epoch_peak_bytes']) /
                                     statistics.median(base['epoch_peak_bytes']))
    return out


def median_breakdown(rounds: List[dict]) -> dict:
    """Per segment the median over rounds of the ms per iteration; the counts of the last."""
    return dict(rounds[-1], ms={k: statistics.median(r['ms'][k] for r in rounds)
                                for k in rounds[0]['ms']})


def images_needed(s: Settings) -> int:
    """Training images the pipeline and feature parts need (s.images when given)."""
    # + the counted iteration and the profiled one
    per_epoch = s.batch * (s.pipeline_warmup + (s.pipeline_iters or 2) + 1 + s.profile)
    return s.images or max(per_epoch, s.feature_images)


def fake_data(s: Settings, tmp: str) -> str:
    """A fake Tiny-ImageNet (64-px JPEGs; 100 images per class, 10 to 200 classes), generated
    in `tmp`, or once under s.data_dir and reused while its recorded spec matches."""
    from benchmark.data.fakes import make_fake_tiny_imagenet
    images = images_needed(s)
    classes = min(200, max(10, images // 100))
    spec = dict(num_classes=classes, train_per_class=math.ceil(images / classes),
                val_per_class=5, size=64, seed=0)
    if s.data_dir is None:
        return make_fake_tiny_imagenet(tmp, **spec)
    folder = Path(s.data_dir) / f'fake-tiny-{classes}x{spec["train_per_class"]}'
    marker = folder / 'spec.json'
    if not (marker.is_file() and json.loads(marker.read_text()) == spec):
        shutil.rmtree(folder, ignore_errors=True)  # a partial or different folder
        make_fake_tiny_imagenet(folder, **spec)
        marker.write_text(json.dumps(spec))  # last: only a complete folder is reused
    return str(folder / 'tiny-imagenet-200')
