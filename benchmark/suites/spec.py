"""A suite file (``configs/suites/<name>.py``) and its expansion into runs with stable names.

A suite is a small mmengine-style ``.py`` file::

    configs = ['configs/mocov2_r18_tiny.py',                      # a config as it is
               dict(config='configs/mixco_r18_tiny.py',           # ... or with variants:
                    grid={'model.mix_temperature': [0.1, 0.2]},   # one run per combination
                    cfg_options={'model.mix_weight': 1.0})]       # fixed for this entry
    seeds = [0, 1, 2]
    procs = 2                                # processes per run (tools/dist_train.sh CONFIG 2)
    cfg_options = {'train_cfg.max_epochs': 50}   # every run (not a variant)
    evaluations = ['default', 'linear_paper',    # after each run: the default protocols,
                   dict(protocols=['linear_paper'], eval_data='cifar10', data_root='data'),
                   dict(protocols=['knn'], device='cpu')]  # tools/eval.py --device cpu
    slurm = dict(partition='gpu', cpus_per_task=5, time='24:00:00')  # for --launcher slurm
    reuse = ['demo_digits']   # records (and work dirs) of these suites count as this one's
    min_seeds = 5; min_effect = 1.0; equivalence_margin = 0.5   # statistics: suites/policy.py
    primary = dict(protocols=['knn', 'linear_fast'])           # ... the primary family

A run of this suite whose config and seed match a record of a reused suite is not trained again:
that record is the run's, and its row and curves come from the other suite's folders.

A grid is a dict of dotted keys to lists of values (their product) or a list of such dicts (their
union: one factor at a time). The grid's overrides are the run's *variant*: they name the run
and label its row. A run is named ``<config stem>[-<digest of its overrides>]-s<seed>``;
``--cfg-options``-style overrides reach tools/train.py as the same KEY=VALUE strings, and the
run's config is checked with ``benchmark.engine.config.check`` before anything starts.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mmengine.config import Config

from benchmark.cli import did_you_mean
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import merge_options, read_config
from benchmark.engine.config_text import config_identity, config_setting
from benchmark.evaluation.device import parse_device
from benchmark.evaluation.evaluate import describe_run
from benchmark.layout import REPO_ROOT, config_stem, suite_results_dir, suite_work_dir
from benchmark.reports.comparisons import StatsPolicy
from benchmark.reports.records import setting_sha256
from benchmark.suites.budget import budget_runs, read_budget, read_costs, trains_by_epoch
from benchmark.suites.options import digest, option_text, parse_option  # noqa: F401  public here
from benchmark.suites.policy import SuiteError, read_policy
from benchmark.names import DATA_TYPES, DEFAULT_PROTOCOLS, FEATURE_PROTOCOLS, protocol_name

SUITE_KEYS = ('name', 'configs', 'seeds', 'procs', 'cfg_options', 'evaluations', 'slurm',
              'reuse', 'min_seeds', 'min_effect', 'equivalence_margin', 'primary', 'budget')
ENTRY_KEYS = ('config', 'grid', 'cfg_options')
EVALUATION_KEYS = ('protocols', 'eval_data', 'data_root', 'linear_config', 'device')
SLURM_KEYS = ('partition', 'time', 'gpus_per_node', 'cpus_per_task', 'mem', 'account', 'qos',
              'constraint', 'array_parallelism', 'signal_delay_s', 'max_requeues', 'extra',
              'cluster', 'nodes', 'poll_s')  # benchmark.suites.slurm.PARAMETERS: what each sets
EVAL_PROTOCOLS = (*FEATURE_PROTOCOLS, 'linear_paper')


@dataclass(frozen=True)
class Evaluation:
    """What runs after a run's training: the default protocols (tools/train.py records them) or
    tools/eval.py with `protocols` on `eval_data` (None: the pretraining data), on `device`
    (its --device; None: the GPU where the evaluation runs has one, else the CPU). The device
    does not name the evaluation: its records are the same wherever it ran."""

    name: str
    protocols: Tuple[str, ...]
    eval_data: Optional[str] = None
    data_root: Optional[str] = None
    linear_config: Optional[str] = None
    device: Optional[str] = None

    @property
    def is_default(self) -> bool:
        return self.name == 'default'


DEFAULT = Evaluation('default', tuple(DEFAULT_PROTOCOLS))


@dataclass
class Run:
    """One training run of a suite: a config, a seed and its overrides."""

    name: str
    config: str  # the path the suite names
    seed: int
    variant: Dict[str, Any]  # the grid's overrides: the row label
    option_args: List[str]  # KEY=VALUE for --cfg-options, randomness.seed included
    work_dir: str
    config_sha256: str  # of config_identity: what the run's records carry
    info: Dict[str, Any]  # describe_run: method, backbone, data, epochs, seed, ...
    max_epochs: int
    dataset: Dict[str, Any] = field(default_factory=dict)  # type and data_root of its training
    setting_sha256: Optional[str] = None  # what its records' setting_sha256 will be
    overrides: Dict[str, Any] = field(default_factory=dict)  # ... and their overrides
    budget: Optional[Dict[str, Any]] = None  # a run at equal compute: benchmark/suites/budget.py

    @property
    def variant_label(self) -> str:
        return ', '.join(f'{key}={option_text(value)}' for key, value in self.variant.items())


@dataclass
class Suite:
    """An expanded suite: its runs, the evaluations after each, where it writes."""

    name: str
    path: str
    runs: List[Run]
    seeds: List[int]
    procs: int
    evaluations: Tuple[Evaluation, ...]
    cfg_options: Dict[str, Any]
    slurm: Dict[str, Any]
    results_dir: str
    notes: List[str] = field(default_factory=list)
    reused: List[Tuple[str, str]] = field(default_factory=list)  # (results dir, work dir) each
    policy: StatsPolicy = field(default_factory=StatsPolicy)  # how its comparisons are judged
    budget: Optional[Dict[str, Any]] = None  # dict(baseline, epochs): budget.read_budget
    costs: Dict[str, Dict[str, float]] = field(default_factory=dict)  # each config's step count

    @property
    def wants_default(self) -> bool:
        return any(e.is_default for e in self.evaluations)

    @property
    def record_dirs(self) -> List[str]:
        """Where the suite's records are read from: its own folder, then the reused suites'."""
        return [self.results_dir] + [results for results, _ in self.reused]

    def work_dirs(self, run: Run) -> List[str]:
        """The run's work dir, then the same run's in each reused suite (for its curves)."""
        return [run.work_dir] + [str(Path(work) / run.name) for _, work in self.reused]


# -- reading the suite file ------------------------------------------------------------------------

def _hint(key: str, allowed: Sequence[str]) -> str:
    return did_you_mean(key, allowed) or f'; allowed: {", ".join(allowed)}'


def _check_keys(section: dict, allowed: Sequence[str], where: str) -> None:
    for key in section:
        if key not in allowed:
            raise SuiteError(f'{where}: unknown key {key!r}{_hint(str(key), allowed)}')


def _overrides(value: Any, where: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SuiteError(f'{where} must be a dict of KEY: VALUE, got {value!r}')
    for key, item in value.items():
        if not isinstance(key, str) or not key or ' ' in key or '=' in key:
            raise SuiteError(f'{where}: bad key {key!r}; use dotted keys like model.queue_size')
        option_text(item)
    return dict(value)


def _grid(value: Any, where: str) -> List[Dict[str, Any]]:
    """The variants of a grid (dict: product) or of a list of grids (union); [{}] if none."""
    if value is None:
        return [{}]
    grids = value if isinstance(value, (list, tuple)) else [value]
    variants: List[Dict[str, Any]] = []
    for i, grid in enumerate(grids):
        spot = f'{where}[{i}]' if isinstance(value, (list, tuple)) else where
        grid = _overrides(grid, spot)
        if not grid:
            raise SuiteError(f'{spot} is empty; leave grid out for the config as it is')
        axes = [v if isinstance(v, (list, tuple)) else [v] for v in grid.values()]
        if any(not axis for axis in axes):
            raise SuiteError(f'{spot}: every key needs at least one value')
        variants += [dict(zip(grid, combo)) for combo in itertools.product(*axes)]
    return variants


def _evaluation(item: Any, where: str) -> Evaluation:
    if item == 'default':
        return DEFAULT
    if isinstance(item, str):
        item = dict(protocols=[item])
    if not isinstance(item, dict):
        raise SuiteError(f"{where} must be 'default', a protocol name or a dict, got {item!r}")
    _check_keys(item, EVALUATION_KEYS, where)
    raw = item.get('protocols')
    raw = [raw] if isinstance(raw, str) else list(raw or [])
    try:
        protocols = tuple(protocol_name(p) for p in raw)
    except ValueError as err:
        raise SuiteError(f'{where}: {err}') from None
    if not protocols or any(p not in EVAL_PROTOCOLS for p in protocols):
        raise SuiteError(f'{where}: protocols must be some of {list(EVAL_PROTOCOLS)}, got {raw}')
    data = item.get('eval_data')
    if data is not None and data not in DATA_TYPES:
        raise SuiteError(f'{where}: eval_data {data!r} unknown; one of {sorted(DATA_TYPES)}')
    if data not in (None, 'digits') and not item.get('data_root'):
        raise SuiteError(f'{where}: eval_data {data} needs data_root (the folder of its files)')
    device = item.get('device')
    if device is not None and not isinstance(device, str):
        raise SuiteError(f"{where}: device must be a string such as 'cpu' or 'cuda:1', "
                         f'got {device!r}')
    if device is not None:
        try:  # the spelling only: the machine that runs the evaluation may not be this one
            parse_device(device)
        except ValueError as err:
            raise SuiteError(f'{where}: {err}') from None
    name = '+'.join(protocols) + (f'@{data}' if data else '')
    return Evaluation(name, protocols, data, item.get('data_root'), item.get('linear_config'),
                      device)


def _int_list(value: Any, where: str, low: int) -> List[int]:
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items or any(isinstance(v, bool) or not isinstance(v, int) or v < low for v in items):
        raise SuiteError(f'{where} must be a non-empty list of integers >= {low}, got {value!r}')
    if len(set(items)) != len(items):
        raise SuiteError(f'{where} lists a value twice: {list(items)}')
    return list(items)


def resolve_config(path: str) -> str:
    """The absolute path of a config: as given where it exists, else in the repository."""
    if Path(path).is_file():
        return str(Path(path).resolve())
    if (REPO_ROOT / path).is_file():
        return str(REPO_ROOT / path)
    raise SuiteError(f'config {path} not found; see configs/ for the list')


def read_suite(path: str) -> Config:
    """The suite file as a Config, with every top-level key checked."""
    if not Path(path).is_file():
        raise SuiteError(f'suite {path} not found; suites live in configs/suites/')
    try:
        cfg = read_config(str(path))
    except ConfigError as err:
        raise SuiteError(f'suite {err}') from None
    _check_keys(cfg, SUITE_KEYS, f'suite {path}')
    if 'configs' not in cfg or not cfg.configs:
        raise SuiteError(f'suite {path}: configs is missing or empty '
                         '(list the pretraining configs)')
    return cfg


# -- expansion ----------------------------------------------------------------------------------

class _Configs:
    """Read each config file once; each run gets a copy with its overrides merged."""

    def __init__(self, world_size: int = 1) -> None:
        self.cache: Dict[str, Config] = {}
        self.world_size = world_size  # each run's processes: the queue must hold their batch

    def build(self, path: str, options: Dict[str, Any]) -> Config:
        if path not in self.cache:
            self.cache[path] = read_config(path)
        cfg = copy.deepcopy(self.cache[path])
        merge_options(cfg, options)
        validate_config(cfg, world_size=self.world_size)
        return cfg


def _entries(cfg: Config, where: str) -> List[Tuple[str, Dict[str, Any], List[Dict[str, Any]]]]:
    """(config, fixed overrides, variants) of each item of `configs`."""
    entries = []
    for i, entry in enumerate(cfg.configs):
        spot = f'{where}: configs[{i}]'
        if isinstance(entry, str):
            entry = dict(config=entry)
        if not isinstance(entry, dict) or 'config' not in entry:
            raise SuiteError(f'{spot} must be a config path or dict(config=..., grid=...)')
        _check_keys(entry, ENTRY_KEYS, spot)
        entries.append((str(entry['config']),
                        _overrides(entry.get('cfg_options'), f'{spot}.cfg_options'),
                        _grid(entry.get('grid'), f'{spot}.grid')))
    return entries


def expand_suite(path: str, seeds: Optional[Sequence[int]] = None,
                 results_root: str = 'results', work_root: str = 'work_dirs',
                 procs: Optional[int] = None) -> Suite:
    """Read, check and expand a suite file into its runs (config x variant x seed).

    Every run's config is built with its overrides and checked (unknown keys and types, bad
    values) before anything starts. Two entries that expand to the same config and seed run
    once (a note says so).

    Args:
        path: The suite file.
        seeds: Replace the suite's seeds (e.g. 2 for a quick look).
        results_root: Records and tables go to <results_root>/suites/<name>/.
        work_root: Runs train in <work_root>/suites/<name>/<run>/.
        procs: Replace the suite's processes per run.

    Raises:
        SuiteError: One line naming the suite, the run and the key.
    """
    cfg = read_suite(path)
    name = str(cfg.get('name') or Path(path).stem)
    if not re.fullmatch(r'[A-Za-z0-9_.-]+', name) or name.startswith('.'):
        raise SuiteError(f'suite {path}: name {name!r} must be a plain file name')
    seeds = _int_list(seeds if seeds is not None else cfg.get('seeds', [0]),
                      f'suite {path}: seeds', 0)
    procs = cfg.get('procs', 1) if procs is None else procs
    if isinstance(procs, bool) or not isinstance(procs, int) or procs < 1:
        raise SuiteError(f'suite {path}: procs must be an integer >= 1 (processes per run), '
                         f'got {procs!r}')
    common = _overrides(cfg.get('cfg_options'), f'suite {path}: cfg_options')
    policy = read_policy(cfg, f'suite {path}')  # min_seeds, min_effect, ... primary
    evaluations = tuple(_evaluation(item, f'suite {path}: evaluations[{i}]')
                        for i, item in enumerate(cfg.get('evaluations', ['default'])))
    if len({e.name for e in evaluations}) != len(evaluations):
        raise SuiteError(f'suite {path}: evaluations lists one twice: '
                         f'{[e.name for e in evaluations]}')
    slurm = dict(cfg.get('slurm') or {})
    if 'max_num_timeout' in slurm:  # its name before the release that renamed it
        raise SuiteError(f'suite {path}: slurm.max_num_timeout is now slurm.max_requeues '
                         '(requeues at the time limit)')
    _check_keys(slurm, SLURM_KEYS, f'suite {path}: slurm')
    reuse = cfg.get('reuse') or []
    if not isinstance(reuse, (list, tuple)) or len(set(map(str, reuse))) != len(reuse) or not all(
            isinstance(r, str) and re.fullmatch(r'[A-Za-z0-9_.-]+', r) and not r.startswith('.')
            and r != name for r in reuse):
        raise SuiteError(f'suite {path}: reuse must be a list of other suites\' names, each once '
                         f"(e.g. ['demo_digits']), got {reuse!r}")
    reused = [(str(suite_results_dir(other, results_root)),
               str(suite_work_dir(other, '', work_root))) for other in reuse]
    configs, runs, seen, notes = _Configs(procs), [], {}, []
    entries = _entries(cfg, f'suite {path}')
    budget = read_budget(cfg, f'suite {path}', [config for config, _, _ in entries])
    results_dir = str(suite_results_dir(name, results_root))
    costs = read_costs(results_dir) if budget else {}

    def add(config: str, resolved: str, overrides: Dict[str, Any], variant: Dict[str, Any],
            seed: int, budget_info: Optional[Dict[str, Any]] = None) -> Config:
        tag = f'-{digest(overrides)}' if overrides else ''
        run_name = f'{config_stem(config)}{tag}-s{seed}'
        options = {**overrides, 'randomness.seed': seed}
        args = [f'{key}={option_text(value)}' for key, value in options.items()]
        try:
            run_cfg = configs.build(resolved, {k: parse_option(a.split('=', 1)[1])
                                               for k, a in zip(options, args)})
        except ConfigError as err:
            raise SuiteError(f'suite {path}: run {run_name} ({config}): {err}') from None
        if not trains_by_epoch(run_cfg):  # plan, resume, status and report count epochs
            raise SuiteError(f'suite {path}: run {run_name} ({config}) trains by iterations '
                             f'(train_cfg {dict(run_cfg.train_cfg)}); a suite runs whole '
                             'epochs: give it train_cfg=dict(by_epoch=True, max_epochs=E)')
        sha = hashlib.sha256(config_identity(run_cfg).encode()).hexdigest()
        if (sha, seed) in seen:
            notes.append(f'{run_name} is the same config as {seen[sha, seed]}: run once')
            same = next(r for r in runs if r.name == seen[sha, seed])
            same.budget = same.budget or budget_info  # the baseline at its budget's epochs
            return run_cfg
        seen[sha, seed] = run_name
        train = run_cfg.train_dataloader.dataset
        setting = config_setting(run_cfg, resolved, configs.cache[resolved])
        runs.append(Run(run_name, config, seed, variant, args,
                        str(suite_work_dir(name, run_name, work_root)), sha,
                        describe_run(run_cfg, dict(world_size=procs)),
                        int(run_cfg.train_cfg.max_epochs),
                        dict(type=train.type, data_root=train.get('data_root', '')),
                        setting_sha256(setting['text'], procs), setting['overrides'],
                        budget_info))
        return run_cfg

    matched = []  # (config, resolved, overrides, variant, the run's config) for the budget
    for config, fixed, variants in entries:
        resolved = resolve_config(config)
        for variant in variants:
            overrides = {**common, **fixed, **variant}
            for seed in seeds:
                run_cfg = add(config, resolved, overrides, variant, seed)
            matched.append((config, resolved, overrides, variant, run_cfg))
    if budget:
        runs_before = len(runs)
        budget_runs(budget, matched, costs, procs, seeds, add)
        notes.append(f'budget: {len(runs) - runs_before} run(s) at the training FLOPs of '
                     f"{budget['baseline']} at {budget['epochs']} epochs")
    return Suite(name, str(path), runs, seeds, procs, evaluations, common, slurm,
                 results_dir, notes, reused, policy, budget, costs)

