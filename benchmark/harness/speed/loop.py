"""The training loop's own cost per iteration: the suite's mmengine Runner (its hooks, the online
linear probe, logging every 50 iterations) against a plain PyTorch loop over the same model,
batch and views (`for batch in loader: loss.backward(); opt.step()`).

Both loops read the same views, drawn once by the dataset's own transform and kept in memory,
so neither waits for a loader and the difference is the loop's own work: hooks, the message
hub, the data preprocessor, parsing the losses, host reads. Each is measured with MoCo-v2 on
the settings' ResNet and with a backbone of almost no compute (mean colour -> linear, queue of
4 batches), where that fixed cost is most of an iteration. The two loops run in turn in blocks
of iterations inside one Runner run (a hook runs the plain loop's blocks between the Runner's),
A B, B A, ..., and each figure is the median over rounds of adjacent blocks. A second phase
first fills every training scalar's log history with `history` values, as a long run would
have, to show whether the cost grows with the run. Beside it, the loader's per-sample seeding:
batches of the same images through the dataset with their seeds (`ResumableSampler`'s keys)
and without, in the main process and in one worker.
"""
import copy
import os
import statistics
import time
from typing import Callable, Dict, List, Optional

import numpy as np
import torch
from mmengine.dataset import default_collate
from mmengine.hooks import Hook
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.registry import DATASETS, MODELS
from torch import nn
from torch.utils.data import DataLoader, Dataset

from benchmark import dist
from benchmark.data.sampler import SampleKey
from benchmark.data.seeding import sample_seed
from benchmark.harness.speed.pipeline import MeasuredEnough, pipeline_cfg
from benchmark.harness.speed.step import train_step
from benchmark.harness.speed.timing import Settings, in_turn, sync

LOOP_KINDS = ('resnet', 'null')
LOOP_DEFAULTS = dict(loop_rounds=5, loop_iters=8, loop_null_iters=100, loop_history=100000,
                     loop_warmup=5)
LOG_INTERVAL = 50  # the LoggerHook interval of the suite's runtime config
DISTINCT_BATCHES = 4  # batches of views drawn once, then cycled


def loop_setting(s: Settings, name: str) -> int:
    return getattr(s, name, None) or LOOP_DEFAULTS[name]


class NullBackbone(nn.Module):
    """A backbone of almost no compute: the mean colour of each image, mapped to `feature_dim`."""

    def __init__(self, feature_dim: int = 512) -> None:
        super().__init__()
        self.feature_dim = feature_dim
        self.fc = nn.Linear(3, feature_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean((2, 3)))


def null_encoders(model: nn.Module) -> nn.Module:
    """MoCo with both encoders' backbones replaced by NullBackbone (same feature size)."""
    device = next(model.parameters()).device
    model.backbone = NullBackbone(model.backbone.feature_dim).to(device)
    model.backbone_momentum = copy.deepcopy(model.backbone).requires_grad_(False)
    return model


class CycledItems(Dataset):
    """`length` items cycling through `items` (the dataset's own outputs, drawn once)."""

    def __init__(self, items: list, length: int) -> None:
        self.items, self.length = items, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        return self.items[i % len(self.items)]


class LoopTimer(Hook):
    """Time the Runner's iterations in blocks and run the plain loop's blocks between them."""

    priority = 'LOWEST'  # after every other hook's work of the iteration

    def __init__(self, plain: Callable[[int], None], warmup: int, iters: int, rounds: int,
                 phases: List[str], device: torch.device,
                 prefill: Callable[[object], None]) -> None:
        self.plain, self.warmup, self.iters, self.device = plain, warmup, iters, device
        self.prefill = prefill
        self.segments = [(p, who) for p in phases for r in range(rounds)
                         for who in in_turn(['project', 'plain'], r)]
        self.seconds: Dict[str, Dict[str, List[float]]] = {
            p: {'project': [], 'plain': []} for p in phases}
        self.pos, self.count, self.phase, self.start = 0, 0, phases[0], 0.0

    def iterations_needed(self) -> int:
        return self.warmup + self.iters * sum(who == 'project' for _, who in self.segments)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.count += 1
        if self.count == self.warmup:
            self.plain(self.warmup)  # the plain loop's warm-up, untimed
            self._next(runner)
        elif self.count > self.warmup and (self.count - self.warmup) % self.iters == 0:
            sync(self.device)
            phase, _ = self.segments[self.pos]
            self.seconds[phase]['project'].append(time.perf_counter() - self.start)
            self.pos += 1
            self._next(runner)

    def _next(self, runner) -> None:
        """Run the plain blocks due before the Runner's next one; start timing that one."""
        while True:
            if self.pos == len(self.segments):
                raise MeasuredEnough
            phase, who = self.segments[self.pos]
            if phase != self.phase:
                self.prefill(runner)
                self.phase = phase
            if who == 'project':
                break
            sync(self.device)
            start = time.perf_counter()
            self.plain(self.iters)
            sync(self.device)
            self.seconds[phase]['plain'].append(time.perf_counter() - start)
            self.pos += 1
        sync(self.device)
        self.start = time.perf_counter()


def fill_history(length: int) -> Callable[[object], None]:
    """A prefill: every training scalar's log history replaced by `length` values."""
    def prefill(runner) -> None:
        scalars = runner.message_hub.log_scalars
        for key in [k for k in scalars if k.startswith('train/')]:
            last = float(scalars[key].data[0][-1])
            scalars[key] = HistoryBuffer(np.full(length, last), np.ones(length, dtype=np.int64))
    return prefill


def plain_loop(model: nn.Module, optimizer, loader: DataLoader,
               device: torch.device) -> Callable[[int], None]:
    """n iterations of the plain loop: views to the device, loss, backward, SGD step."""
    batches = iter(())

    def run(n: int) -> None:
        nonlocal batches
        for _ in range(n):
            batch = next(batches, None)
            if batch is None:
                batches = iter(loader)
                batch = next(batches)
            train_step(model, optimizer, [v.to(device, non_blocking=True)
                                          for v in batch['inputs']])
    return run


def loop_block(kind: str, s: Settings, device: torch.device, data_root: str, work_dir: str,
               phases: List[str]) -> dict:
    """Per-iteration seconds of the Runner and the plain loop, in turn, for one model kind."""
    from mmengine.runner import Runner
    cfg = pipeline_cfg('mocov2', s, data_root, work_dir, f'loop_{kind}')
    cfg.default_hooks.logger.interval = LOG_INTERVAL
    cfg.train_dataloader.update(num_workers=0, persistent_workers=False)  # replaced below
    cfg.custom_hooks = [*cfg.custom_hooks,
                        dict(type='OnlineLinearProbeHook', num_test=8, batch_size=8)]
    if kind == 'null':
        cfg.model.queue_size = 4 * s.batch
    iters = loop_setting(s, 'loop_iters' if kind == 'resnet' else 'loop_null_iters')
    warmup, rounds = loop_setting(s, 'loop_warmup'), loop_setting(s, 'loop_rounds')
    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    items = [dataset[i % len(dataset)] for i in range(DISTINCT_BATCHES * s.batch)]
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).to(device).train()
    if kind == 'null':
        null_encoders(model)
    opt_cfg = dict(cfg.optim_wrapper.optimizer)
    opt_cfg.pop('type')
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], **opt_cfg)
    plain_loader = DataLoader(CycledItems(items, len(items)), batch_size=s.batch,
                              collate_fn=default_collate, drop_last=True)
    plain = plain_loop(model, optimizer, plain_loader, device)
    runner = Runner.from_cfg(cfg)
    if kind == 'null':
        null_encoders(dist.unwrap(runner.model))
    timer = LoopTimer(plain, warmup, iters, rounds, phases, device,
                      fill_history(loop_setting(s, 'loop_history')))
    loop = runner.train_loop
    loop.dataloader = DataLoader(CycledItems(items, (timer.iterations_needed() + 1) * s.batch),
                                 batch_size=s.batch, collate_fn=default_collate, drop_last=True)
    runner.register_hook(timer)
    try:
        runner.train()
    except MeasuredEnough:
        pass
    out = dict(iterations_per_block=iters, rounds=rounds)
    for phase, sec in timer.seconds.items():
        project = [t / iters for t in sec['project']]
        plain_s = [t / iters for t in sec['plain']]
        out[phase] = dict(
            project_ms=[1e3 * t for t in project], plain_ms=[1e3 * t for t in plain_s],
            median_project_ms=1e3 * statistics.median(project),
            median_plain_ms=1e3 * statistics.median(plain_s),
            fixed_ms=1e3 * statistics.median(a - b for a, b in zip(project, plain_s)),
            ratio=statistics.median(a / b for a, b in zip(project, plain_s)))
    return out


def bench_seeding(s: Settings, data_root: str, batches: int = 8, rounds: int = 3) -> dict:
    """Milliseconds per batch of the dataset's views with per-sample seeds and without, in
    turn, with 0 and 1 loader workers (a persistent worker: its start is not timed)."""
    cfg = pipeline_cfg('mocov2', s, data_root, '.', 'seeding')
    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    n = batches * s.batch
    orders = dict(seeded=[SampleKey(i % len(dataset), sample_seed(0, 0, i)) for i in range(n)],
                  plain=[i % len(dataset) for i in range(n)])
    out = {}
    for workers in (0, 1):
        loaders = {name: DataLoader(dataset, batch_size=s.batch, sampler=order,
                                    num_workers=workers, persistent_workers=workers > 0,
                                    collate_fn=default_collate)
                   for name, order in orders.items()}
        seconds: Dict[str, List[float]] = {name: [] for name in loaders}
        for r in range(rounds + 1):  # round 0 warms up (and starts the workers)
            for name in in_turn(list(loaders), r):
                start = time.perf_counter()
                for _ in loaders[name]:
                    pass
                if r:
                    seconds[name].append((time.perf_counter() - start) / batches)
        seeded, plain = (statistics.median(seconds[k]) for k in ('seeded', 'plain'))
        out[f'workers_{workers}'] = dict(
            seeded_ms=1e3 * seeded, plain_ms=1e3 * plain,
            ratio=statistics.median(a / b for a, b in zip(seconds['seeded'], seconds['plain'])),
            per_sample_ms=1e3 * (seeded - plain) / s.batch)
        del loaders
    return out


def bench_loop(s: Settings, device: torch.device, data_root: str, tmp: str,
               log: Callable[[str], None] = print, kinds=LOOP_KINDS) -> dict:
    """Both model kinds, each fresh and after `loop_history` logged values per scalar."""
    out: Dict[str, object] = dict(history=loop_setting(s, 'loop_history'),
                                  log_interval=LOG_INTERVAL)
    for kind in kinds:
        block = out[kind] = loop_block(kind, s, device, data_root,
                                       os.path.join(tmp, f'loop_{kind}'), ['fresh', 'long'])
        log(f'  loop, {kind}: Runner {block["fresh"]["median_project_ms"]:.2f} ms/iteration, '
            f'plain {block["fresh"]["median_plain_ms"]:.2f}, fixed cost '
            f'{block["fresh"]["fixed_ms"]:.2f} ms ({block["long"]["fixed_ms"]:.2f} after '
            f'{out["history"]} logged values)')
    seeding = out['seeding'] = bench_seeding(s, data_root)
    log('  loader seeding: ' + ', '.join(f'{w}: x{v["ratio"]:.3f}' for w, v in seeding.items()))
    return out


def loop_line(result: dict, s: Optional[Settings] = None) -> str:
    """The loop part as one paragraph of the report."""
    parts = []
    for kind in LOOP_KINDS:
        if kind not in result:
            continue
        fresh, long = result[kind]['fresh'], result[kind]['long']
        name = 'near-zero-compute model' if kind == 'null' else (
            f'MoCo-v2 ResNet-{s.depth}' if s else 'MoCo-v2')
        parts.append(f'{name}: Runner {fresh["median_project_ms"]:.2f} ms per iteration, plain '
                     f'loop {fresh["median_plain_ms"]:.2f} ms ({fresh["ratio"]:.3f}x), fixed '
                     f'cost {fresh["fixed_ms"]:.2f} ms; after {result["history"]:,} logged '
                     f'values per scalar {long["fixed_ms"]:.2f} ms ({long["ratio"]:.3f}x)')
    line = ('Training loop against a plain PyTorch loop (same model, batch and views in memory, '
            f'logging every {result["log_interval"]} iterations, online probe on): '
            + '; '.join(parts) + '.')
    seeding = result.get('seeding')
    if seeding:
        line += (' Loader batches with per-sample seeds against the same batches without: '
                 + '; '.join(f'{w.replace("_", " ")}: {v["seeded_ms"]:.1f} against '
                             f'{v["plain_ms"]:.1f} ms ({v["ratio"]:.3f}x, '
                             f'{v["per_sample_ms"]:.3f} ms per sample)'
                             for w, v in seeding.items()) + '.')
    return line
