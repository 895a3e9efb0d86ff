"""Speed and memory of MixCo against its baselines (project issue 5; the paper's Table 3).

Three measurements in one process, each running the compared variants in turn (A B C, C B A,
...) and reporting medians, because a shared machine's speed drifts over minutes:
1. the bare training step (`model.loss` + backward + SGD step on tensors already in memory):
   images/s and peak tensor memory of MoCo-v2, MixCo, SimCLR and MixCo-SimCLR;
2. the real pipeline (mmengine Runner from the configs, image files decoded and augmented by the
   dataloader, hooks on) against the bare step of the same model, timed next to it;
3. feature extraction, and kNN with our faiss `knn_predict` against lightly's torch one and
   against the bare matrix product (the BLAS floor).
Images/s always counts source images (B per step), the same for every method.
"""
import gc
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import MODELS

from benchmark.harness.speed_eval import bench_features, bench_knn, knn_mismatches  # noqa: F401
from benchmark.harness.timing import (Settings, cpu_peak_growth, in_turn, own_bytes,  # noqa: F401
                                      paired_ratio, step_peak_bytes, sync, timed)
from benchmark import dist
from benchmark.data.gpu_views import fill_view_size
from benchmark.engine.channels_last import to_channels_last, use_channels_last
from benchmark.engine.config_check import read_config
from benchmark.layout import REPO_ROOT

ROOT = REPO_ROOT
# method (= config stem) -> table label
METHODS = {'mocov2': 'MoCo-v2', 'mixco': 'MixCo (MoCo-v2)', 'simclr': 'SimCLR',
           'mixco_simclr': 'MixCo (SimCLR)'}
PAIRS = {'mixco_moco': ('mixco', 'mocov2'), 'mixco_simclr': ('mixco_simclr', 'simclr')}
PIPELINE_METHODS = ('mocov2', 'mixco')
MEMORY_KIND = {'cuda': 'cuda: own tensors (weights, optimizer state, inputs) + '
                       'torch.cuda.max_memory_allocated growth during one step',
               'cpu': 'cpu: own tensors (weights, optimizer state, inputs) + peak growth of live '
                      'tensor bytes during one step, from torch.profiler allocation events '
                      '(every c10 CPU allocation and free; excludes BLAS/oneDNN scratch)'}


PRECISIONS = {'fp32': None, 'bf16': torch.bfloat16}  # autocast dtype of a bare step
# Config overrides (--cfg-options form, merged into the pipeline's config) of each view variant.
VIEWS_OPTIONS: Dict[str, dict] = {
    'pil': {},  # PIL views in the loader workers (the paper configs)
    'gpu': {'train_dataloader.dataset.view': 'raw_uint8',  # as configs/*_tiny_fast.py
            'model.data_preprocessor': dict(type='GPUViewPreprocessor', view='mocov2')},
}


NOTES = dict(
    time_ratio='median over rounds of the ratio of adjacent step times (drift cancels)',
    memory_ratio='peak bytes (own tensors + growth during a step) of MixCo / baseline',
    pipeline_efficiency='min over MoCo-v2 and MixCo of the median over rounds of end-to-end '
                        'images/s / bare-step images/s timed right after, same model and batch',
    faiss_speedup='median over rounds of lightly seconds / faiss seconds',
    knn_over_matmul='median over rounds of faiss seconds / (queries @ bank.T) seconds')


def model_cfg(method: str, s: Settings) -> Config:
    """The method's Tiny-ImageNet config with the backbone of the settings."""
    path = ROOT / 'configs' / f'{method}_r{s.depth}_tiny.py'
    if not path.is_file():  # the backbone is overridden below anyway
        path = ROOT / 'configs' / f'{method}_r18_tiny.py'
    cfg = read_config(str(path))
    cfg.model.backbone = dict(depth=s.depth, small_stem=s.small_stem)
    return cfg


def build_step(method: str, s: Settings, device: torch.device):
    """(model, SGD optimizer) built from the method's config, on `device`, in training mode."""
    import methods  # noqa: F401  registers the models
    cfg = model_cfg(method, s)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).to(device).train()
    if s.channels_last:
        use_channels_last(model)
    opt_cfg = dict(cfg.optim_wrapper.optimizer)
    opt_cfg.pop('type')
    params = [p for p in model.parameters() if p.requires_grad]
    return model, torch.optim.SGD(params, **opt_cfg)


def train_step(model, optimizer, inputs: List[torch.Tensor],
               dtype: Optional[torch.dtype] = None) -> None:
    """What mmengine's (Amp)OptimWrapper does with the loss dict: sum, backward, step, zero_grad.

    dtype: autocast dtype of the forward (None: float32); bf16 needs no loss scaling.
    """
    with torch.autocast(inputs[0].device.type, dtype=dtype, enabled=dtype is not None):
        losses = model.loss(inputs)
    sum(v for k, v in losses.items() if 'loss' in k).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def step_inputs(inputs: List[torch.Tensor], s: Settings) -> List[torch.Tensor]:
    """The views as a bare step feeds them to `model.loss` (which skips the forward pre-hook)."""
    return to_channels_last(inputs) if s.channels_last else inputs


def bench_steps(s: Settings, device: torch.device) -> Dict[str, dict]:
    """Bare-step seconds (alternating the four methods) and peak memory of each method."""
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randn(s.batch, 3, s.input_size, s.input_size, generator=gen).to(device)
              for _ in range(2)]
    inputs, dtype = step_inputs(inputs, s), PRECISIONS[s.precision]
    steps = {m: build_step(m, s, device) for m in METHODS}
    times: Dict[str, List[float]] = {m: [] for m in METHODS}
    for r in range(s.warmup + s.repeats):
        for m, (model, opt) in in_turn(list(steps.items()), r):
            t = timed(lambda: train_step(model, opt, inputs, dtype), device)
            if r >= s.warmup:
                times[m].append(t)
    out = {}
    for m, (model, opt) in steps.items():
        growth = step_peak_bytes(lambda: train_step(model, opt, inputs, dtype), device)
        base = own_bytes(model, opt, inputs)
        sec = statistics.median(times[m])
        out[m] = dict(seconds_per_step=sec, images_per_s=s.batch / sec, step_seconds=times[m],
                      own_bytes=base, step_peak_growth_bytes=growth, peak_bytes=base + growth)
    return out


class ThroughputHook(Hook):
    """Time the pipeline's iterations after warm-up, then bare steps of the same model and batch.

    The bare steps run in after_train_epoch, when the epoch's batches are consumed and the
    workers idle, on the last batch after the model's data_preprocessor.
    """

    priority = 'LOWEST'  # after_train_iter stamps the time after every other hook's work

    def __init__(self, warmup: int, bare_steps: int, device: torch.device,
                 settings: Optional[Settings] = None) -> None:
        self.warmup, self.bare_steps, self.device = warmup, bare_steps, device
        self.settings = settings or Settings()
        self.stamps: List[float] = []
        self.waits: List[float] = []  # IterTimerHook's data_time: waiting for the loader
        self.bare: List[float] = []
        self.last_batch = None

    def before_train_epoch(self, runner) -> None:
        self.stamps = [time.perf_counter()]  # stamps[i]: end of iteration i - 1 (0: start)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        sync(self.device)
        self.stamps.append(time.perf_counter())
        self.waits.append(runner.message_hub.get_scalar('train/data_time').current())
        self.last_batch = data_batch

    def after_train_epoch(self, runner) -> None:
        model = dist.unwrap(runner.model)
        inputs = step_inputs(model.data_preprocessor(self.last_batch, True)['inputs'],
                             self.settings)
        opt, dtype = runner.optim_wrapper.optimizer, PRECISIONS[self.settings.precision]
        self.bare = [timed(lambda: train_step(model, opt, inputs, dtype), self.device)
                     for _ in range(self.bare_steps + 1)][1:]

    def data_wait_fraction(self) -> float:
        """Share of the timed iterations' wall time spent waiting for the next batch."""
        return sum(self.waits[self.warmup:]) / (self.stamps[-1] - self.stamps[self.warmup])

    def images_per_s(self, batch: int) -> float:
        window = self.stamps[self.warmup:]
        if len(window) < 2:
            raise ValueError(f'pipeline: {len(self.stamps)} iterations ran, need more than the '
                             f'{self.warmup} warm-up ones; raise --pipeline-iters')
        return batch * (len(window) - 1) / (window[-1] - window[0])


def pipeline_cfg(method: str, s: Settings, data_root: str, work_dir: str, name: str) -> Config:
    """The method's config as tools/train.py runs it, on the fake data, for one epoch.

    Per-iteration hooks stay on (timer, logger at a large interval, scheduler, RunInfoHook);
    epoch-end work (checkpoint, kNN monitor) is outside the timed iterations and is left out.
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
    cfg.custom_hooks = [h for h in cfg.get('custom_hooks', []) if h['type'] != 'KNNMonitorHook']
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend')]  # no wandb in a benchmark
    cfg.update(work_dir=work_dir, experiment_name=name, log_level='WARNING', launcher='none')
    if s.precision == 'bf16':  # as configs/*_fast.py
        cfg.optim_wrapper.update(type='CPUCapableAmpOptimWrapper', dtype='bfloat16',
                                 loss_scale=dict(enabled=False))
    if s.channels_last:
        cfg.custom_hooks.append(dict(type='ChannelsLastHook'))
    cfg.merge_from_dict(VIEWS_OPTIONS[s.views])
    fill_view_size(cfg)  # the device views' size follows the dataset's input_size
    return cfg


def pipeline_block(method: str, s: Settings, device: torch.device, data_root: str,
                   work_dir: str, name: str) -> tuple:
    """(end-to-end images/s, bare-step seconds, data-wait share) of one epoch of a fresh Runner."""
    from mmengine.runner import Runner
    runner = Runner.from_cfg(pipeline_cfg(method, s, data_root, work_dir, name))
    hook = ThroughputHook(s.pipeline_warmup, max(3, s.repeats // 4), device, s)
    runner.register_hook(hook)
    runner.train()
    loader_iter = getattr(runner.train_dataloader, '_iterator', None)
    if loader_iter is not None and hasattr(loader_iter, '_shutdown_workers'):
        loader_iter._shutdown_workers()  # persistent workers would outlive the block
    del runner
    gc.collect()
    return hook.images_per_s(s.batch), hook.bare, hook.data_wait_fraction()


def bench_pipeline(s: Settings, device: torch.device, data_root: str, tmp: str) -> dict:
    """Rounds of MoCo-v2 and MixCo epochs in turn; efficiency = end-to-end / adjacent bare step."""
    runs: Dict[str, dict] = {m: dict(images_per_s=[], bare_images_per_s=[], efficiency=[],
                                     data_wait_fraction=[]) for m in PIPELINE_METHODS}
    for r in range(s.pipeline_rounds):
        for m in in_turn(list(PIPELINE_METHODS), r):
            ips, bare, wait = pipeline_block(m, s, device, data_root, f'{tmp}/work_{m}_{r}',
                                             f'{m}_{r}')
            bare_ips = s.batch / statistics.median(bare)
            runs[m]['images_per_s'].append(ips)
            runs[m]['bare_images_per_s'].append(bare_ips)
            runs[m]['efficiency'].append(ips / bare_ips)
            runs[m]['data_wait_fraction'].append(wait)
    for run in runs.values():
        run.update({f'median_{k}': statistics.median(v) for k, v in list(run.items())})
    return runs


def describe_device(device: torch.device) -> str:
    """CPU model (and GPU name) with the thread counts the timings ran under."""
    cpu = 'unknown CPU'
    if Path('/proc/cpuinfo').is_file():
        names = [line.split(':', 1)[1].strip() for line in
                 Path('/proc/cpuinfo').read_text().splitlines() if line.startswith('model name')]
        cpu = names[0] if names else cpu
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    text = f'{cpu}, {cpus} usable cores, torch threads {torch.get_num_threads()}'
    if device.type == 'cuda':
        text = f'{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda}); host {text}'
    return text


def fake_data(s: Settings, tmp: str) -> str:
    """A fake Tiny-ImageNet (64-px JPEGs) with one pipeline epoch of training images."""
    from benchmark.data.fakes import make_fake_tiny_imagenet
    images = max(s.batch * (s.pipeline_warmup + s.pipeline_iters), s.feature_images)
    return make_fake_tiny_imagenet(tmp, num_classes=10, train_per_class=math.ceil(images / 10),
                                   val_per_class=5, size=64, seed=0)


def run(s: Settings, log: Callable[[str], None] = print) -> dict:
    """Every measurement: headline ratios at the top level, raw numbers under their part."""
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    # One thread on CPU by default: while other processes share the cores, a thread that is
    # descheduled stalls every OpenMP barrier, which made 2-thread steps 3-10x slower and erratic.
    torch.set_num_threads(s.threads or (torch.get_num_threads() if device.type == 'cuda' else 1))
    out = dict(device=describe_device(device), memory_kind=MEMORY_KIND[device.type],
               notes=NOTES)
    with tempfile.TemporaryDirectory() as tmp:
        data_root = fake_data(s, tmp)
        if 'step' not in s.skip:
            log('bare training steps ...')
            out['steps'] = bench_steps(s, device)
            for pair, (new, base) in PAIRS.items():
                a, b = out['steps'][new], out['steps'][base]
                out[f'{pair}_time_ratio'] = paired_ratio(a['step_seconds'], b['step_seconds'])
                out[f'{pair}_memory_ratio'] = a['peak_bytes'] / b['peak_bytes']
                out[f'{pair}_step_growth_ratio'] = (a['step_peak_growth_bytes'] /
                                                    b['step_peak_growth_bytes'])
        if 'pipeline' not in s.skip:
            log('pipeline (mmengine Runner) ...')
            out['pipeline'] = bench_pipeline(s, device, data_root, tmp)
            out['pipeline_efficiency'] = min(p['median_efficiency']
                                             for p in out['pipeline'].values())
        if 'features' not in s.skip:
            log('feature extraction ...')
            out['features'] = bench_features(s, device, data_root)
    if 'knn' not in s.skip:
        log('kNN ...')
        knn = out['knn'] = bench_knn(s)
        out['faiss_speedup'] = paired_ratio(knn['seconds']['lightly'], knn['seconds']['faiss'])
        out['knn_over_matmul'] = paired_ratio(knn['seconds']['faiss'], knn['seconds']['matmul'])
        out['faiss_same_predictions'] = knn['mismatches_not_ties'] == 0
    return out


def markdown(result: dict, s: Settings) -> str:
    """The paper's Table 3 form: method, time/step, images/s, peak memory, ratio vs baseline."""
    lines = [f'Speed and memory: ResNet-{s.depth}{" (small stem)" if s.small_stem else ""}, '
             f'{s.input_size} px, batch {s.batch} per process, {s.precision}'
             f'{", channels_last" if s.channels_last else ""}, {s.views} views; '
             f'{result["device"]}.', '',
             f'Peak memory: {result["memory_kind"]}.', '']
    if 'steps' in result:
        lines += ['| Method | MixCo | Time/step (ms) | Images/s | Peak memory (MiB) | '
                  'Time vs baseline | Memory vs baseline |', '|---|---|---|---|---|---|---|']
        pair_of = {new: pair for pair, (new, _) in PAIRS.items()}
        for m, label in METHODS.items():
            r, pair = result['steps'][m], pair_of.get(m)
            ratios = [1.0, 1.0] if pair is None else [result[f'{pair}_time_ratio'],
                                                       result[f'{pair}_memory_ratio']]
            lines.append(f'| {label} | {"O" if pair else "X"} | {1e3 * r["seconds_per_step"]:.1f} '
                         f'| {r["images_per_s"]:.1f} | {r["peak_bytes"] / 2**20:.1f} '
                         f'| {ratios[0]:.2f} | {ratios[1]:.2f} |')
    if 'pipeline' in result:
        lines += ['', '| Pipeline (Runner, real data loading) | Images/s | Bare step images/s | '
                  'Efficiency | Waiting for data |', '|---|---|---|---|---|']
        for m, p in result['pipeline'].items():
            lines.append(f'| {METHODS[m]} | {p["median_images_per_s"]:.1f} | '
                         f'{p["median_bare_images_per_s"]:.1f} | {p["median_efficiency"]:.2f} | '
                         f'{100 * p["median_data_wait_fraction"]:.0f}% |')
    if 'features' in result:
        lines += ['', f'Feature extraction: {result["features"]["images_per_s"]:.1f} images/s.']
    if 'knn' in result:
        k = result['knn']
        lines += ['', f'kNN ({k["queries"]} queries, bank {k["bank"]} x {k["dim"]}, k={k["k"]}, '
                  f'{k["classes"]} classes, {k["device"]}): faiss {k["median_faiss_s"]:.3g} s, '
                  f'lightly {k["median_lightly_s"]:.3g} s, matmul {k["median_matmul_s"]:.3g} s '
                  f'({k["matmul_gflops"]:.0f} GFLOP/s); '
                  f'top-1 equal {k["top1_equal_fraction"]:.4f}.']
    return '\n'.join(lines) + '\n'


HEADLINE = ('mixco_moco_time_ratio', 'mixco_moco_memory_ratio', 'mixco_simclr_time_ratio',
            'mixco_simclr_memory_ratio', 'pipeline_efficiency', 'faiss_speedup',
            'faiss_same_predictions', 'knn_over_matmul')
