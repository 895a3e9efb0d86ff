"""Speed and memory of MixCo and its family against their baselines (the paper's Table 3),
each beside its arithmetic floor.

The parts, each running the compared variants in turn (A B C, C B A, ...) and reporting medians,
because a shared machine's speed drifts over minutes:
1. step: the bare training step (`model.loss` + backward + SGD on tensors already in memory) of
   every family member: time and peak memory over its baseline, beside the floor of the
   encoder-pass count and of FlopCounterMode's count (benchmark/harness/speed/floor.py);
2. pipeline: MoCo-v2 and MixCo through the mmengine Runner on a generated Tiny-ImageNet folder,
   per configuration (views in PIL workers or on the device; fp32 or bf16 + channels_last),
   against bare steps of the same model and batch: images/s, data-wait share, ratios, TFLOP/s;
3. loop: the suite's Runner against a plain PyTorch loop of the same model, batch and views,
   with the ResNet and with a near-zero-compute model (its fixed cost per iteration), fresh
   and after a long run's log history (benchmark/harness/speed/loop.py);
4. features and kNN (speed_eval.py); 5. views: drawing a batch's views (speed_views.py);
6. demo (only when named): where a demo run's time goes, by part (benchmark/harness/speed/demo.py).
Images/s always counts source images (B per step), the same for every method.
"""
import os
import statistics
import tempfile
import time
from typing import Callable, Dict, List, Optional

import torch

from benchmark import stop
from benchmark.engine.progress import duration
from benchmark.harness.speed.demo import bench_demo
from benchmark.harness.speed.eval import bench_features, bench_knn
from benchmark.harness.speed.floor import (achieved, count_flops, describe_device, device_name,
                                           device_slug, encoder_images, floor_passes, peak_tflops,
                                           usable_cores)
from benchmark.harness.speed.loop import bench_loop
from benchmark.harness.speed.pipeline import (PAPER_GRID, PIPELINE_METHODS, bench_pipeline,
                                              config_name, config_settings, fake_data,
                                              images_needed)
from benchmark.harness.speed.step import (METHODS, PAIRS, PRECISIONS, build_step, step_inputs,
                                          train_step)
from benchmark.harness.speed.views import bench_views
from benchmark.harness.speed.timing import (NAMED_ONLY, Settings, in_turn, own_bytes,
                                            paired_ratio, step_peak_bytes, timed)

PARTS = ('step', 'pipeline', 'loop', 'features', 'knn', 'views', 'demo')
# The presets of tools/benchmark_speed.py; the command line wins. --paper: one GPU, batch 128,
# 20,000 images, an epoch per configuration of PAPER_GRID.
PAPER = dict(depth=18, input_size=224, batch=128, small_stem=False, images=20000,
             pipeline_iters=None, pipeline_rounds=1, configs=PAPER_GRID)
# --full: more repeats, rounds and iterations (steadier medians) and the larger kNN search,
# about 2.5 times the default run's time.
FULL = dict(repeats=20, warmup=3, pipeline_rounds=3, pipeline_iters=20, pipeline_warmup=5,
            feature_images=512, knn_bank=50000, knn_queries=10000, loop_rounds=5, loop_iters=8,
            loop_null_iters=100, loop_warmup=5, views_repeats=5)
# Each part's share of a default run's time (measured on a 2-core AMD EPYC; the demo part's
# about 6 minutes beside it): the weights of the ETA printed as each part ends.
SHARE = dict(step=0.34, pipeline=0.28, loop=0.26, features=0.03, knn=0.08, views=0.01, demo=4.7)
MEMORY_KIND = {'cuda': 'cuda: own tensors (weights, optimizer state, inputs) + '
                       'torch.cuda.max_memory_allocated growth during one step',
               'cpu': 'cpu: own tensors (weights, optimizer state, inputs) + peak growth of live '
                      'tensor bytes during one step, from torch.profiler allocation events '
                      '(every c10 CPU allocation and free; excludes BLAS/oneDNN scratch)'}
NOTES = dict(
    time_ratio='bare step: median over rounds of the ratio of adjacent step times (drift cancels)',
    memory_ratio='bare step: peak bytes (own tensors + growth during a step), member / baseline',
    floor_passes='encoder forward units per source image (3 per image with gradient, 1 per key; '
                 'counted on a real step; benchmark/harness/speed/floor.py), member / baseline',
    floor_flops='FlopCounterMode FLOPs (2 per multiply-add, matmul and conv only) of one real '
                'step, forward + backward, member / baseline',
    flops_per_image='FlopCounterMode count of one step (forward + backward) / B source images',
    encoder_images='images per source image one step passes through the encoders, with a '
                   'gradient and without (forward hooks; the pass count of floor_passes)',
    peak_fraction='achieved TFLOP/s / the dense peak of the device and precision (table in '
                  'speed_floor.py); fp32 on CUDA: cuDNN convolutions use TF32 by default, so '
                  'the share of the 67 TFLOP/s fp32 peak can exceed 1',
    pipeline='per configuration VIEWS-PRECISION[-cl]: end-to-end images/s of a Runner epoch '
             '(after warm-up iterations), bare-step images/s of the same model on its last batch '
             'right after, data-wait share (IterTimerHook data_time / wall time), time ratio '
             '(paired over rounds, MixCo / MoCo-v2), memory ratio (bare-step peak), bound: data '
             'if the wait share >= 0.10, else compute if end-to-end >= 0.90 x bare, else overhead',
    epoch_memory_ratio='CUDA only: torch.cuda.max_memory_allocated over the Runner iterations, '
                       'MixCo / MoCo-v2',
    pipeline_efficiency='min over configurations and methods of the median end-to-end / '
                        'bare-step images/s',
    paper_setting='the pipeline configuration where MixCo (MoCo-v2) runs fastest; its MixCo '
                  'images/s, data-wait share, MixCo / MoCo-v2 time and memory ratios',
    loop='per iteration, in blocks run in turn: the suite\'s mmengine Runner (its hooks, the online '
         'probe, logging every 50 iterations) and a plain PyTorch loop (loss, backward, SGD step) '
         'on the same model and in-memory views; fixed_ms: median over rounds of Runner - plain '
         'ms per iteration; phase long: after every training scalar\'s log history was filled '
         'with `history` values',
    loop_fixed_ms='loop part, near-zero-compute model: the Runner\'s own ms per iteration',
    faiss_speedup='median over rounds of lightly seconds / faiss seconds',
    knn_over_matmul='median over rounds of faiss seconds / (queries @ bank.T) seconds')


def member_flops(model, opt, inputs: List[torch.Tensor]) -> dict:
    """FLOPs per source image of one forward and of one full step (forward + backward), and
    the images that step passes through the encoders (with gradient, without)."""
    b, images = inputs[0].shape[0], []
    with torch.no_grad():
        forward = count_flops(lambda: model.loss(inputs))
    step = count_flops(lambda: images.append(
        encoder_images(model, lambda: train_step(model, opt, inputs), b)))
    return dict(forward_flops_per_image=forward / b, flops_per_image=step / b,
                encoder_images=images[0])


def bench_steps(s: Settings, device: torch.device, methods=tuple(METHODS)) -> Dict[str, dict]:
    """Bare-step seconds (the members in turn), FLOPs and peak memory of each member."""
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randn(s.batch, 3, s.input_size, s.input_size, generator=gen).to(device)
              for _ in range(2)]
    inputs, dtype = step_inputs(inputs, s), PRECISIONS[s.precision]
    steps = {m: build_step(m, s, device) for m in methods}
    out = {m: member_flops(model, opt, inputs) for m, (model, opt) in steps.items()}
    times: Dict[str, List[float]] = {m: [] for m in methods}
    for r in range(s.warmup + s.repeats):
        for m, (model, opt) in in_turn(list(steps.items()), r):
            t = timed(lambda: train_step(model, opt, inputs, dtype), device)
            if r >= s.warmup:
                times[m].append(t)
    peak = peak_tflops(device_name(device), s.precision)
    for m, (model, opt) in steps.items():
        growth = step_peak_bytes(lambda: train_step(model, opt, inputs, dtype), device)
        base, sec = own_bytes(model, opt, inputs), statistics.median(times[m])
        out[m].update(seconds_per_step=sec, images_per_s=s.batch / sec, step_seconds=times[m],
                      own_bytes=base, step_peak_growth_bytes=growth, peak_bytes=base + growth,
                      **achieved(s.batch / sec, out[m]['flops_per_image'], peak))
    return out


def step_ratios(steps: Dict[str, dict]) -> dict:
    """Each member over its baseline: measured time and memory, and the two floors."""
    out = {}
    for pair, (new, base) in PAIRS.items():
        a, b = steps[new], steps[base]
        out[f'{pair}_time_ratio'] = paired_ratio(a['step_seconds'], b['step_seconds'])
        out[f'{pair}_memory_ratio'] = a['peak_bytes'] / b['peak_bytes']
        out[f'{pair}_step_growth_ratio'] = (a['step_peak_growth_bytes'] /
                                            b['step_peak_growth_bytes'])
        out[f'{pair}_floor_passes'] = floor_passes(a['encoder_images'], b['encoder_images'])
        out[f'{pair}_floor_flops'] = a['flops_per_image'] / b['flops_per_image']
    return out


def pipeline_flops(s: Settings, device: torch.device) -> Dict[str, float]:
    """FLOPs per source image of the pipeline's methods, counted on one step of random inputs."""
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randn(s.batch, 3, s.input_size, s.input_size, generator=gen).to(device)
              for _ in range(2)]
    return {m: member_flops(*build_step(m, s, device), inputs)['flops_per_image']
            for m in PIPELINE_METHODS}


def bench_grid(s: Settings, device: torch.device, data_root: str, tmp: str,
               flops: Dict[str, float], log: Callable[[str], None],
               grid: Optional[dict] = None, done: Callable[[], None] = lambda: None) -> dict:
    """bench_pipeline for each configuration (the settings' own when s.configs is empty), into
    `grid`; done() after each configuration (run() saves the partial result there)."""
    grid = {} if grid is None else grid
    for name in s.configs or (config_name(s),):
        c = config_settings(s, name)
        log(f'  {name} ...')
        grid[name] = g = bench_pipeline(c, device, data_root, tmp, flops,
                                        peak_tflops(device_name(device), c.precision), f'{name}_')
        done()
        for method, run in g['methods'].items():
            for key, table in run.get('breakdown', {}).get('profile', {}).items():
                log(f'  {name} {method}: one iteration by {key}\n{table}')
        m, b = g['methods']['mixco'], g['methods']['mocov2']  # as it goes: a log cut short keeps it
        log(f'  {name}: MixCo {m["median_images_per_s"]:.0f} images/s (data wait '
            f'{m["median_data_wait_fraction"]:.1%}), MoCo-v2 {b["median_images_per_s"]:.0f}, '
            f'time ratio {g["time_ratio"]:.2f}')
    return grid


def paper_keys(grid: dict) -> dict:
    """The headline of the paper's setting: the configuration where MixCo runs fastest."""
    name = max(grid, key=lambda n: grid[n]['methods']['mixco']['median_images_per_s'])
    c, mixco = grid[name], grid[name]['methods']['mixco']
    return dict(paper_setting_config=name,
                paper_setting_images_per_s=mixco['median_images_per_s'],
                paper_setting_mocov2_images_per_s=c['methods']['mocov2']['median_images_per_s'],
                paper_setting_data_wait=mixco['median_data_wait_fraction'],
                paper_setting_time_ratio=c['time_ratio'],
                paper_setting_memory_ratio=c['memory_ratio'],
                paper_setting_bound=mixco['bound'], paper_setting_tflops=mixco.get('tflops'),
                paper_setting_peak_fraction=mixco.get('peak_fraction'),
                paper_setting_floor_images_per_s=mixco.get('floor_images_per_s'))


def compile_speedup(grid: dict) -> dict:
    """MixCo's images/s with torch.compile over the same configuration without it, for each
    'X-compile' of the grid whose X is there too (> 1: compile wins there)."""
    ips = {n: c['methods']['mixco']['median_images_per_s'] for n, c in grid.items()}
    eager = {n: n.removesuffix('-compile') for n in ips if n.endswith('-compile')}
    out = {e: ips[n] / ips[e] for n, e in eager.items() if e in ips}
    return dict(compile_speedup=out) if out else {}


def run(s: Settings, log: Callable[[str], None] = print,
        save: Callable[[dict], None] = lambda partial: None) -> dict:
    """Every part not in s.skip: headline keys at the top level, raw numbers under their part.
    save(partial) gets the result so far, marked 'partial', after each part and each pipeline
    configuration, so that a run cut short (a job's time limit) still leaves what it measured."""
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    # One thread on CPU by default: while other processes share the cores, a thread that is
    # descheduled stalls every OpenMP barrier, which made 2-thread steps 3-10x slower and erratic.
    torch.set_num_threads(s.threads or (torch.get_num_threads() if device.type == 'cuda' else 1))
    name, load = device_name(device), load_average()
    out = dict(device=describe_device(device), device_name=name,
               device_slug=device_slug(name, usable_cores()), memory_kind=MEMORY_KIND[device.type],
               peak_tflops={p: peak_tflops(name, p) for p in PRECISIONS}, notes=NOTES)

    def saved(part: str) -> None:
        save(dict(out, partial=dict(done=part, load_average=dict(start=load,
                                                                 now=load_average()))))

    parts = [p for p in PARTS if p not in s.skip]
    stop.plan(parts)
    log(f'parts: {", ".join(parts)}; the ETA follows each')
    eta = Eta(parts, log)

    if device.type == 'cuda':
        out['cuda_tf32'] = dict(cudnn=torch.backends.cudnn.allow_tf32,
                                matmul=torch.backends.cuda.matmul.allow_tf32)
    with tempfile.TemporaryDirectory() as tmp:
        if {'pipeline', 'loop', 'features'} - set(s.skip):
            log(f'generating {images_needed(s)} images ...')
            start = time.perf_counter()
            data_root = fake_data(s, tmp)
            out['data'] = dict(images=images_needed(s), seconds=time.perf_counter() - start,
                               cached_under=s.data_dir)
        if 'step' not in s.skip:
            log('bare training steps ...')
            out['steps'] = bench_steps(s, device)
            out.update(step_ratios(out['steps']))
            saved('step')
            eta.finished('step')
        if 'pipeline' not in s.skip:
            log('pipeline (mmengine Runner) ...')
            flops = ({m: out['steps'][m]['flops_per_image'] for m in PIPELINE_METHODS}
                     if 'steps' in out else pipeline_flops(s, device))
            grid = out['pipeline'] = {}
            bench_grid(s, device, data_root, tmp, flops, log, grid,
                       lambda: saved(f'pipeline {", ".join(grid)}'))
            out['pipeline_efficiency'] = min(p['median_efficiency'] for c in grid.values()
                                             for p in c['methods'].values())
            out.update(compile_speedup(grid))
            if s.paper:
                out.update(paper_keys(grid))
            eta.finished('pipeline')
        if 'loop' not in s.skip:
            log('training loop against a plain PyTorch loop ...')
            loop = out['loop'] = bench_loop(s, device, data_root, tmp, log)
            out.update(loop_fixed_ms=loop['null']['fresh']['fixed_ms'],
                       loop_fixed_ms_long_run=loop['null']['long']['fixed_ms'],
                       loop_time_ratio=loop['resnet']['fresh']['ratio'])
            saved('loop')
            eta.finished('loop')
        if 'features' not in s.skip:
            log('feature extraction ...')
            out['features'] = bench_features(s, device, data_root)
            saved('features')
            eta.finished('features')
    if 'knn' not in s.skip:
        log('kNN ...')
        knn = out['knn'] = bench_knn(s)
        out['faiss_speedup'] = paired_ratio(knn['seconds']['lightly'], knn['seconds']['faiss'])
        out['knn_over_matmul'] = paired_ratio(knn['seconds']['faiss'], knn['seconds']['matmul'])
        out['faiss_same_predictions'] = knn['mismatches_not_ties'] == 0
        saved('knn')
        eta.finished('knn')
    if 'views' not in s.skip:
        log('views ...')
        out['views'] = bench_views(s, device)
        eta.finished('views')
    if 'demo' not in s.skip:
        log('demo runs by part ...')
        out['demo'] = bench_demo(s, log)
        eta.finished('demo')
    out['load_average'] = dict(start=load, end=load_average())
    return out


class Eta:
    """After each part: its time, and the time left estimated from the parts' `SHARE`s; the
    part marked finished for the stop line (benchmark/stop.py)."""

    def __init__(self, parts: List[str], log: Callable[[str], None]) -> None:
        self.left, self.log = list(parts), log
        self.start = self.last = time.perf_counter()
        self.done = 0.0

    def finished(self, part: str) -> None:
        stop.finished(part)
        self.left.remove(part)
        now = time.perf_counter()
        self.done += SHARE[part]
        rest = sum(SHARE[p] for p in self.left)
        eta = f'; ETA {duration((now - self.start) * rest / self.done)}' if self.left else ''
        self.log(f'{part}: done in {duration(now - self.last)} ({duration(now - self.start)} '
                 f'so far{eta})')
        self.last = now


def load_average() -> Optional[List[float]]:
    """The host's 1, 5 and 15-minute load averages (other work on a shared machine)."""
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, 'getloadavg') else None


HEADLINE = (*[f'{p}_{k}' for p in PAIRS for k in ('time_ratio', 'floor_passes', 'floor_flops',
                                                  'memory_ratio')],
            'pipeline_efficiency', 'loop_fixed_ms', 'loop_fixed_ms_long_run', 'loop_time_ratio',
            'paper_setting_config', 'paper_setting_images_per_s',
            'paper_setting_data_wait', 'paper_setting_time_ratio', 'paper_setting_memory_ratio',
            'paper_setting_peak_fraction', 'paper_setting_bound', 'compile_speedup', 'faiss_speedup',
            'faiss_same_predictions', 'knn_over_matmul')
