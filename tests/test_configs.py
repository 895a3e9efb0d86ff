"""Every config loads, builds its model on CPU, follows the naming rule and the contracts.

Each config file is read once; each distinct model is built once; a test walks every config and
lists each one that fails."""
import copy
import functools
import re

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DATASETS, MODELS, PARAM_SCHEDULERS

import benchmark.data  # noqa: F401
import methods  # noqa: F401
from benchmark.engine.train_views import fill_view_size
from benchmark.names import BASELINES, METHOD_NAMES, PAPER_MIXCO
from benchmark.layout import config_method, method_configs
from tests.conftest import CONFIG_DATA, ROOT

CONFIGS = sorted(p for p in (ROOT / 'configs').glob('*.py'))
# What follows the method: _r<depth>_<data>, then _<epochs>e (a longer schedule than the paper's
# default for that backbone, Table 6), _fast (speed switches on) or _graph (those and the step
# replayed from one CUDA graph).
REST = re.compile(r'_r(18|34|50)_([a-z0-9-]+)(_\d+e|_fast|_graph)?\.py')
CONVENTION = '<method>_r<depth>_<data>[_<epochs>e|_fast|_graph].py'
PAPER = sorted(p for p in CONFIGS if p.name.endswith('_tiny.py'))
# The paper's Table 1 methods: supervised and each base method of its CSV with and without MixCo.
PAPER_METHODS = ('supervised', *PAPER_MIXCO, *PAPER_MIXCO.values())


@functools.lru_cache(maxsize=None)
def _read(name: str) -> Config:
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    fill_view_size(cfg)  # the device views' size follows the dataset's, as train.py fills it
    return cfg


def load(name: str) -> Config:
    """A fresh copy of configs/<name> (read once per session)."""
    return copy.deepcopy(_read(name))


def test_configs_exist():
    """Every method of benchmark/names.py METHODS has a config; the paper's methods have one per
    backbone on Tiny-ImageNet."""
    have = {p.name for p in CONFIGS}
    missing = [f'{m}: no configs/{m}_r<depth>_<data>.py; every method of benchmark/names.py '
               'METHODS needs a config' for m in METHOD_NAMES.values() if not method_configs(m)]
    missing += [f'the paper\'s {m}: no configs/{m}_r{depth}_tiny.py' for m in PAPER_METHODS
                for depth in (18, 34, 50) if f'{m}_r{depth}_tiny.py' not in have]
    assert not missing, '\n'.join(missing)


def naming_problems(names) -> list:
    """One line per config file name that breaks the convention, saying what to do."""
    problems = []
    for name in names:
        method = config_method(name)
        if method is None:
            problems.append(f'configs/{name}: its name starts with no method of benchmark/names.py '
                            f'METHODS; add the method there or name the config {CONVENTION}')
            continue
        rest = REST.fullmatch(name[len(method):])
        if not rest:
            problems.append(f'configs/{name}: the name of a config of {method!r} is {CONVENTION} '
                            '(depth 18, 34 or 50)')
        elif rest.group(2) not in CONFIG_DATA:
            problems.append(f'configs/{name}: {rest.group(2)!r} is no dataset of '
                            f'benchmark/names.py DATASETS; the data part is one of {CONFIG_DATA}')
    return problems


def test_config_names_follow_the_convention():
    """<method>_r<depth>_<data>.py with a method and a dataset of benchmark/names.py, or
    ..._<epochs>e.py, ..._fast.py."""
    problems = naming_problems(p.name for p in CONFIGS)
    assert not problems, '\n'.join(problems)


def test_naming_problems_say_what_to_do():
    """The check above can fail, and its lines name the file and the fix."""
    assert naming_problems(['mixco_simclr_r18_tiny.py', 'mocov2_r50_imagenet.py',
                            'mixco_r18_tiny_400e.py', 'imix_r18_digits_fast.py']) == []
    assert naming_problems(['nosuchmethod_r18_digits.py', 'mixco_r101_tiny.py',
                            'mocov2_r18_svhn.py']) == [
        'configs/nosuchmethod_r18_digits.py: its name starts with no method of benchmark/names.py '
        f'METHODS; add the method there or name the config {CONVENTION}',
        f"configs/mixco_r101_tiny.py: the name of a config of 'mixco' is {CONVENTION} "
        '(depth 18, 34 or 50)',
        "configs/mocov2_r18_svhn.py: 'svhn' is no dataset of benchmark/names.py DATASETS; the "
        f'data part is one of {CONFIG_DATA}']


def test_a_config_belongs_to_its_longest_method():
    assert config_method('mixco_simclr_r18_tiny.py') == 'mixco_simclr'
    assert config_method('mixco_r18_tiny.py') == 'mixco'
    assert config_method('nosuchmethod_r18_digits.py') is None
    assert [p.name for p in method_configs('mixco_simclr')] == [
        'mixco_simclr_r18_tiny.py', 'mixco_simclr_r34_tiny.py', 'mixco_simclr_r50_tiny.py']
    assert method_configs('mixco')[0].name == 'mixco_r18_tiny.py'
    assert not any('simclr' in p.name for p in method_configs('mixco'))


def test_a_config_trains_the_method_its_name_says():
    wrong = []
    for path in CONFIGS:
        kind = load(path.name).model.type
        if METHOD_NAMES.get(kind) != config_method(path.name):
            wrong.append(f'{path.name}: its name says {config_method(path.name)!r}, its model '
                         f'type {kind!r} is {METHOD_NAMES.get(kind)!r} in benchmark/names.py '
                         'METHODS')
    assert not wrong, '\n'.join(wrong)


@pytest.mark.slow
def test_every_config_builds_its_model():
    """The model and its dataset type resolve in the registries; the model builds, with the
    feature width of its depth. Configs with equal model settings share one build, and the
    builds run on the meta device (the same constructors and shapes, no memory and no random
    initialisation: a ResNet-50 pair in a tenth of the time); one builds on the CPU below."""
    failures, built = [], {}
    for path in CONFIGS:
        cfg = load(path.name)
        fill_view_size(cfg)  # as every tool does: device views take the dataset's input_size
        if 'queue_size' in cfg.model:
            cfg.model.queue_size = 256  # keep memory small; the contract allows overriding it
        key = repr(cfg.model.to_dict())
        if key not in built:
            try:
                with torch.device('meta'):
                    built[key] = MODELS.build(cfg.model).backbone.feature_dim
            except Exception as err:  # noqa: BLE001  listed below with the config's name
                built[key] = f'{type(err).__name__}: {err}'
        want = 2048 if cfg.model.backbone.depth == 50 else 512
        if built[key] != want:
            failures.append(f'{path.name}: feature_dim {built[key]}, want {want}')
        if DATASETS.get(cfg.train_dataloader.dataset.type) is None:
            failures.append(f'{path.name}: unknown dataset {cfg.train_dataloader.dataset.type}')
    assert not failures, '\n'.join(failures)
    assert len(built) >= 20  # the distinct models really were built


def test_a_config_builds_on_cpu_with_finite_weights():
    cfg = load('mixco_r18_digits.py')
    model = MODELS.build(cfg.model)
    assert model.backbone.feature_dim == 512 and model.queue.device.type == 'cpu'
    assert all(torch.isfinite(v).all() for v in model.state_dict().values()
               if v.is_floating_point())


def _paper_mismatches(name: str, cfg: Config) -> list:
    """docs/design.md's setting: batch 64 per process (128 on 2 GPUs), 224 px, epochs, lr, tau."""
    depth = int(re.search(r'_r(\d+)_', name).group(1))
    opt, model, kind = cfg.optim_wrapper.optimizer, cfg.model, cfg.model.type
    # the method's base: MoCo-v2 for MoCo and its mixing variants, SimCLR for both SimCLRs
    base = BASELINES.get(METHOD_NAMES.get(kind), METHOD_NAMES.get(kind))
    # The authors' SimCLR keeps its argparse default weight decay 1e-6; MoCo's is 1e-4.
    checks = [
        ('batch', cfg.train_dataloader.batch_size, 64),
        ('input_size', cfg.train_dataloader.dataset.input_size, 224),
        ('backbone', model.backbone, dict(depth=depth, small_stem=False)),
        ('epochs', cfg.train_cfg.max_epochs, 100 if depth == 18 else 200),
        ('auto_scale_lr', cfg.auto_scale_lr, dict(enable=True, base_batch_size=128)),
        ('momentum, weight decay', (opt.momentum, opt.weight_decay),
         (0.9, 1e-6 if base == 'simclr' else 1e-4))]
    if base == 'mocov2':
        checks += [('lr, tau', (opt.lr, model.temperature), (0.015, 0.2)),
                   ('queue, momentum, dim', (model.queue_size, model.key_momentum,
                                             model.feature_dim), (65536, 0.999, 128))]
    if base == 'simclr':
        checks += [('lr, tau', (opt.lr, model.temperature), (0.15, 0.5)),
                   ('view', cfg.train_dataloader.dataset.view, dict(name='simclr', min_scale=0.2)),
                   ('the authors\' SimCLR', (model.joint_forward, model.head_batch_norm,
                                             model.gather_negatives, model.sync_bn),
                    (False, False, False, True))]
    if kind == 'MixCoMoCo':
        checks.append(('tau_mix, beta', (model.mix_temperature, model.mix_weight), (0.05, 1.0)))
    if kind == 'MixCoSimCLR':
        checks.append(('tau_mix, beta', (model.mix_temperature, model.mix_weight), (0.5, 1.0)))
    return [f'{name}: {what} is {got!r}, want {want!r}' for what, got, want in checks
            if got != want]


def test_paper_hyperparameters():
    failures = [line for path in PAPER for line in _paper_mismatches(path.name, load(path.name))]
    assert not failures, '\n'.join(failures)


def test_paper_check_names_a_changed_value():
    """The check above can fail: a config with another learning rate is named."""
    changed = load('mixco_r18_tiny.py')
    changed.optim_wrapper.optimizer.lr = 0.03
    assert _paper_mismatches('mixco_r18_tiny.py', changed) == [
        'mixco_r18_tiny.py: lr, tau is (0.03, 0.2), want (0.015, 0.2)']


def epoch_lrs(cfg: Config) -> list:
    """The lr of each epoch of a config, from its param_scheduler built by mmengine's registry and
    stepped once per epoch, as mmengine's ParamSchedulerHook steps an epoch-based scheduler."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))],
                                lr=cfg.optim_wrapper.optimizer.lr)
    epochs = cfg.train_cfg.max_epochs
    schedulers = [PARAM_SCHEDULERS.build(dict(item, optimizer=optimizer,
                                              end=item.get('end', epochs)))
                  for item in cfg.param_scheduler]
    lrs = []
    for _ in range(epochs):
        lrs.append(optimizer.param_groups[0]['lr'])
        optimizer.step()
        for scheduler in schedulers:
            scheduler.step()
    return lrs


def _authors_simclr_lr(lr: float, epochs: int) -> list:
    """The MixCo authors' SimCLR lr per epoch (simclr/pretrain.py: torch's CosineAnnealingLR with
    T_max = epochs, eta_min = 0, stepped after each epoch from epoch 10 on), in closed form and
    float64: epoch e trains at lr (1 + cos(pi k / T_max)) / 2, k = the steps taken before it."""
    out = []
    for epoch in range(epochs):
        steps = np.float64(max(0, epoch - 10))
        out.append(np.float64(lr) * (1 + np.cos(np.pi * steps / np.float64(epochs))) / 2)
    return out


@pytest.mark.parametrize('name', ['simclr_r18_tiny.py', 'simclr_r34_tiny.py', 'simclr_r50_tiny.py',
                                  'mixco_simclr_r18_tiny.py', 'mixco_simclr_r34_tiny.py',
                                  'mixco_simclr_r50_tiny.py'])
def test_simclr_lr_is_the_authors_epoch_by_epoch(name):
    cfg = load(name)
    got = np.array(epoch_lrs(cfg), dtype=np.float64)
    want = np.array(_authors_simclr_lr(0.15, cfg.train_cfg.max_epochs))
    assert np.abs(got - want).max() < 1e-12, f'{name}: worst epoch {np.abs(got - want).argmax()}'
    assert got[10] == 0.15 and got[11] < 0.15 and got[-1] > 0  # 11 epochs flat, never 0


def test_the_lr_check_can_fail():
    """A plain cosine over all epochs (the schedule before) is refused by the comparison."""
    cfg = load('simclr_r18_tiny.py')
    cfg.param_scheduler = [dict(type='CosineAnnealingLR', by_epoch=True, begin=0, eta_min=0.0)]
    got = np.array(epoch_lrs(cfg))
    assert np.abs(got - np.array(_authors_simclr_lr(0.15, 100))).max() > 1e-3


def test_mixco_differs_only_in_mixco_fields():
    """A MixCo config equals its baseline except the model's type and mix_* fields."""
    failures = []
    for mixco, base in [('mixco_r18_tiny.py', 'mocov2_r18_tiny.py'),
                        ('mixco_r50_tiny.py', 'mocov2_r50_tiny.py'),
                        ('mixco_simclr_r18_tiny.py', 'simclr_r18_tiny.py'),
                        ('mixco_r18_digits.py', 'mocov2_r18_digits.py'),
                        ('mixco_r18_tiny_fast.py', 'mocov2_r18_tiny_fast.py')]:
        a, b = load(mixco).to_dict(), load(base).to_dict()
        model_a, model_b = a.pop('model'), b.pop('model')
        if a != b:
            failures.append(f'{mixco} differs from {base} outside the model')
        extra = {k for k in model_a if k not in model_b or model_a[k] != model_b[k]}
        if extra != {'type'} | {k for k in model_a if k.startswith('mix_')}:
            failures.append(f'{mixco}: model differs in {sorted(extra)}')
    assert not failures, '\n'.join(failures)


def test_cfg_options_contract():
    """The --cfg-options keys docs/configuration.md names reach the right places."""
    cfg = load('mixco_r18_tiny.py')
    cfg.merge_from_dict({'train_dataloader.batch_size': 8, 'train_dataloader.dataset.data_root': '/d',
                         'train_dataloader.dataset.input_size': 32, 'train_cfg.max_epochs': 1,
                         'model.queue_size': 64, 'randomness.seed': 7, 'work_dir': '/w'})
    assert cfg.train_dataloader.batch_size == 8 and cfg.train_cfg.max_epochs == 1
    assert cfg.train_dataloader.dataset.data_root == '/d'
    assert cfg.train_dataloader.dataset.input_size == 32
    assert cfg.model.queue_size == 64 and cfg.randomness.seed == 7 and cfg.work_dir == '/w'
    assert 'end' not in cfg.param_scheduler[0]  # cosine follows train_cfg.max_epochs
