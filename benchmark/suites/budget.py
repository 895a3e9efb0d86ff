"""Runs at equal training compute: a suite's ``budget`` gives every config the training FLOPs of
a baseline config at a number of epochs::

    budget = dict(baseline='configs/mocov2_r18_digits.py', epochs=30)

Each config of the suite (each variant, each seed) then also runs for the whole number of
epochs whose training FLOPs come nearest the budget, its learning-rate schedule stretched or
shrunk with it (every epoch-based scheduler's explicit ``begin``, ``end``, ``T_max`` and
``milestones`` scaled by the same factor; a scheduler that follows ``train_cfg.max_epochs``
follows it). A run's FLOPs per epoch are its training step's counted FLOPs per image
(`training_step_cost`, torch's FLOP counter over one real step on the CPU, the same count its
record keeps) times the images an epoch trains on (its processes' batches of the sampler's share
of the training set). The counts are kept in the suite's results folder (``compute_costs.json``)
when the suite first runs, so a rerun or a resume plans the same epochs whatever changes since.
"""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path
import hashlib
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchmark.atomic_io import atomic_write_text
from benchmark.engine.config_text import config_identity
from benchmark.layout import config_stem
from benchmark.suites.policy import SuiteError

BUDGET_KEYS = ('baseline', 'epochs')
COSTS_FILE = 'compute_costs.json'
SCALED_KEYS = ('begin', 'end', 'T_max')


def read_budget(cfg: Any, where: str, configs: list) -> Optional[Dict[str, Any]]:
    """The suite's budget as dict(baseline=<config path as the suite lists it>, epochs=E), or
    None without one.

    Raises:
        SuiteError: A budget that is not a dict of baseline and epochs, names no config of the
            suite's, or asks for no epochs.
    """
    budget = cfg.get('budget')
    if budget is None:
        return None
    if not isinstance(budget, dict) or set(budget) - set(BUDGET_KEYS) or 'baseline' not in budget:
        raise SuiteError(f"{where}: budget must be dict(baseline='configs/<config>.py', "
                         f'epochs=E): the training FLOPs of that config at E epochs; got {budget!r}')
    epochs = budget.get('epochs')
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise SuiteError(f'{where}: budget.epochs must be a whole number of epochs >= 1, '
                         f'got {epochs!r}')
    if budget['baseline'] not in configs:
        raise SuiteError(f"{where}: budget.baseline {budget['baseline']!r} is not one of the "
                         f'suite\'s configs {configs}; the budget is a listed config\'s compute')
    return dict(baseline=str(budget['baseline']), epochs=epochs)


def images_per_epoch(dataset_size: int, batch: int, procs: int, drop_last: bool) -> int:
    """Images one epoch trains on over all processes: each process gets ceil(N / procs) samples
    (the sampler pads the last share), in batches of `batch` (a last partial batch dropped with
    drop_last)."""
    share = math.ceil(dataset_size / procs)
    return procs * (share // batch * batch if drop_last else share)


def count_epoch_cost(cfg: Any, procs: int) -> Dict[str, float]:
    """FLOPs per training image of one real step of the run's config (on the CPU, a batch of its
    training loader) and the images an epoch of it trains on.

    Raises:
        SuiteError: Where the step cannot be counted (its data missing, a model that fails) or
            an epoch trains on no image (a batch over a process's share of the data).
    """
    import torch
    from mmengine.registry import MODELS
    from mmengine.runner import Runner

    from benchmark.engine.train_views import fill_view_size
    from benchmark.evaluation.step_cost import training_step_cost
    cfg = copy.deepcopy(cfg)
    fill_view_size(cfg)  # the device views' size follows the dataset's, as tools/train.py fills it
    loader_cfg = copy.deepcopy(cfg.train_dataloader)
    loader_cfg.update(num_workers=0, persistent_workers=False)
    loader_cfg.pop('prefetch_factor', None)
    name = Path(cfg.filename).name
    try:
        loader = Runner.build_dataloader(loader_cfg, seed=0)
        size = len(loader.dataset)
        images = images_per_epoch(size, loader_cfg.batch_size, procs,
                                  bool(loader_cfg.get('drop_last', False)))
        if images:
            with torch.random.fork_rng():
                torch.manual_seed(0)
                model = MODELS.build(copy.deepcopy(cfg.model))
            step = training_step_cost(model, next(iter(loader)))
    except Exception as err:  # noqa: BLE001 - one line before anything trains
        raise SuiteError(f'the training compute of {name} is unknown: its step could not be '
                         f'counted ({type(err).__name__}: {err}); a budget needs every '
                         'config\'s step counted, its data in place') from None
    if not images:
        raise SuiteError(f'the training compute of {name} is unknown: an epoch trains on no '
                         f'image ({size} images over {procs} process(es), batches of '
                         f'{loader_cfg.batch_size}, the last dropped); give it a smaller '
                         'train_dataloader.batch_size or fewer procs')
    return dict(flops_per_image=float(step['flops_per_image']), images_per_epoch=images)


def matched_epochs(budget_flops: float, epoch_flops: float) -> int:
    """The whole number of epochs (>= 1) whose FLOPs come nearest the budget."""
    if epoch_flops <= 0:
        raise SuiteError(f'an epoch of {epoch_flops} FLOPs cannot match a budget')
    low = max(1, math.floor(budget_flops / epoch_flops))
    return min((low, low + 1), key=lambda e: (abs(e * epoch_flops - budget_flops), e))


def stretched_schedule(cfg: Any, epochs: int) -> Dict[str, Any]:
    """--cfg-options that train the config for `epochs` epochs with its learning-rate schedule
    scaled to them: each epoch-based scheduler's explicit begin, end, T_max and milestones times
    epochs / max_epochs, rounded to whole epochs (a scheduler without them follows max_epochs)."""
    total = int(cfg.train_cfg.max_epochs)
    options: Dict[str, Any] = {'train_cfg.max_epochs': epochs}
    items = cfg.get('param_scheduler') or []
    for i, item in enumerate([items] if isinstance(items, dict) else items):
        if not item.get('by_epoch', True):
            continue
        prefix = f'param_scheduler.{i}.' if not isinstance(items, dict) else 'param_scheduler.'
        for key in SCALED_KEYS:
            if isinstance(item.get(key), int) and not isinstance(item[key], bool):
                value = max(0 if key == 'begin' else 1, round(item[key] * epochs / total))
                if value != item[key]:
                    options[prefix + key] = value
        if isinstance(item.get('milestones'), (list, tuple)):
            steps = [round(m * epochs / total) for m in item['milestones']]
            if steps != list(item['milestones']):
                options[prefix + 'milestones'] = steps
    return options


def schedule_text(cfg: Any, epochs: int) -> str:
    """The learning-rate schedule of the config at `epochs` epochs as `stretched_schedule` sets
    it: 'CosineAnnealingLR epochs 10-200 (T_max 200)'; '; ' between schedulers."""
    options = stretched_schedule(cfg, epochs)
    items = cfg.get('param_scheduler') or []
    parts = []
    for i, item in enumerate([items] if isinstance(items, dict) else items):
        prefix = 'param_scheduler.' if isinstance(items, dict) else f'param_scheduler.{i}.'
        value = {k: options.get(prefix + k, item.get(k)) for k in (*SCALED_KEYS, 'milestones')}
        if not item.get('by_epoch', True):
            parts.append(f"{item.get('type')} by iteration, as configured")
            continue
        begin, end = value['begin'] or 0, value['end'] or epochs
        extra = [f"T_max {value['T_max']}" if value['T_max'] else '',
                 f"milestones {value['milestones']}" if value['milestones'] else '']
        parts.append(f"{item.get('type')} epochs {begin}-{end}"
                     + (f" ({', '.join(e for e in extra if e)})" if any(extra) else ''))
    return '; '.join(parts) or 'constant lr'


def read_costs(results_dir: str) -> Dict[str, Dict[str, float]]:
    """The counts kept by an earlier run of the suite ({} where none)."""
    path = Path(results_dir) / COSTS_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise SuiteError(f'{path}: not JSON ({err}); delete it to count the steps again') from None


def save_costs(results_dir: str, costs: Dict[str, Dict[str, float]]) -> None:
    """Keep the counts, so later runs of the suite plan the same epochs."""
    Path(results_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(results_dir) / COSTS_FILE, json.dumps(costs, indent=1, sort_keys=True))


def budget_text(info: Dict[str, Any]) -> str:
    """The dry run's words for a compute-matched run."""
    from benchmark.reports.compute import flop_text
    return (f"equal compute: {info['epochs']} epochs x {flop_text(info['epoch_flops'])} = "
            f"{flop_text(info['achieved'])}, {info['achieved'] / info['flops']:.3f} x the budget "
            f"{flop_text(info['flops'])} ({info['baseline']} at {info['baseline_epochs']} epochs)"
            + f"; lr {info['schedule']}")


def cost_key(sha: str, procs: int) -> str:
    return f'{sha}:{procs}'


def epoch_flops(costs: Dict[str, Dict[str, float]], key: str, cfg: Any,
                procs: int) -> Tuple[float, Dict[str, float]]:
    """An epoch's training FLOPs of a config, from the kept counts or counted now (kept in
    `costs`)."""
    if key not in costs:
        costs[key] = count_epoch_cost(cfg, procs)
    cost = costs[key]
    return cost['flops_per_image'] * cost['images_per_epoch'], cost


def trains_by_epoch(cfg: Any) -> bool:
    """Whether the config's training loop counts epochs (``train_cfg.max_epochs``), not
    iterations (``by_epoch=False``, ``max_iters``)."""
    loop = cfg.get('train_cfg') or {}
    return (loop.get('by_epoch', True) is not False and 'max_iters' not in loop
            and 'Iter' not in str(loop.get('type', '')) and 'max_epochs' in loop)


def budget_runs(budget: Dict[str, Any], matched: list, costs: Dict[str, Dict[str, float]],
                procs: int, seeds: List[int], add: Callable[..., Any]) -> None:
    """Add each config's (and variant's) run at the budget's training FLOPs, every seed.

    Each run trains by epochs (`spec.expand_suite` refuses a config that trains by iterations).
    """
    base = next(item[4] for item in matched if item[0] == budget['baseline'])
    flops = epoch_flops(costs, cost_key(_sha(base), procs), base, procs)[0] * budget['epochs']
    for config, resolved, overrides, variant, run_cfg in matched:
        per_epoch, _ = epoch_flops(costs, cost_key(_sha(run_cfg), procs), run_cfg, procs)
        epochs = matched_epochs(flops, per_epoch)
        schedule = stretched_schedule(run_cfg, epochs)
        info = dict(baseline=config_stem(budget['baseline']), baseline_epochs=budget['epochs'],
                    flops=flops, epochs=epochs, epoch_flops=per_epoch,
                    achieved=per_epoch * epochs,
                    schedule=schedule_text(run_cfg, epochs))
        for seed in seeds:
            add(config, resolved, {**overrides, **schedule}, {**variant, **schedule}, seed, info)


def _sha(cfg: Any) -> str:
    """What a config's step count is kept under (its identity without its seed and epochs,
    which change neither the step nor the epoch's images)."""
    plain = copy.deepcopy(cfg)
    plain.randomness = dict(plain.get('randomness') or {}, seed=0)
    plain.train_cfg = dict(plain.train_cfg, max_epochs=1)
    plain.param_scheduler = []
    return hashlib.sha256(config_identity(plain).encode()).hexdigest()[:16]
