"""MoCHi's defaults against the text of its paper: Kalantidis et al., "Hard Negative Mixing for
Contrastive Learning", NeurIPS 2020, arXiv 2010.01028.

One row per default: the value the paper gives (None where it gives none for this setting) and
where it says so. Every row with a value is checked against the constructor of `MoCHiMoCo`, its
sampling of the mixing coefficients and configs/mochi_r18_tiny.py."""
import inspect
from types import SimpleNamespace

import torch
from mmengine.config import Config

import methods.mochi as mochi
from methods.mochi import MoCHiMoCo
from tests.conftest import ROOT

GRID = ("Tables 1-2 report a grid of (N, s, s') for ResNet-50 on ImageNet-100 and ImageNet-1K "
        'only; chosen for Tiny-ImageNet, see docs/methods.md')
# name: (the paper's value, or None where it gives none for this setting; the source)
SOURCES = {
    'mix_hardest': (None, f'silent for this setting: N of sec. 4.1; {GRID}'),
    'mix_synthetic': (None, f'silent for this setting: s of sec. 4.1; {GRID}'),
    'mix_query_synthetic': (None, f"silent for this setting: s' of sec. 4.2; {GRID}"),
    'mix_warmup_epochs': (10, 'sec. 5: no hard negatives are synthesised in the first 10 epochs '
                              'on ImageNet-100 (15 on ImageNet-1K)'),
    'alpha': ((0.0, 1.0), 'sec. 4.1: alpha_k in (0, 1), randomly chosen per synthetic point '
                          '(its law is not given: uniform here)'),
    'beta': ((0.0, 0.5), "sec. 4.2: beta_k in (0, 0.5), so the query's share stays below the "
                         "negative's (its law is not given: uniform here)"),
    'N < K': (True, 'sec. 4.1: the hardest are the first N < K of the queue sorted by similarity'),
    'queue_size': (65536, 'sec. 5: K = 65k on ImageNet-1K (16k on ImageNet-100); also the '
                          'MixCo setting of mocov2_r18_tiny.py'),
    'temperature': (None, 'silent: not restated; MoCHi is built on MoCo-v2 (sec. 5), whose '
                          'tau = 0.2 the MixCo setting also uses'),
}


def coefficient_range(name: str, draws: int = 100_000) -> tuple:
    """The range of alpha or beta as `MoCHiMoCo.sample_synthesis` draws them, to two decimals."""
    owner = SimpleNamespace(mix_synthetic=draws, mix_query_synthetic=draws)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        _, alpha, _, beta = MoCHiMoCo.sample_synthesis(owner, 1, 2, torch.device('cpu'))
    values = alpha if name == 'alpha' else beta
    return round(float(values.min()), 2), round(float(values.max()), 2)


def code_defaults() -> dict:
    """Our value of every row the method itself fixes."""
    params = inspect.signature(MoCHiMoCo.__init__).parameters
    ours = {name: params[name].default for name in params if name.startswith('mix_')}
    ours.update(alpha=coefficient_range('alpha'), beta=coefficient_range('beta'))
    assert ours['beta'][1] == mochi.QUERY_SHARE_MAX
    return ours


def config_values(cfg: Config) -> dict:
    """Our value of every row a MoCHi config sets."""
    model = cfg.model
    return {'mix_hardest': model.mix_hardest, 'mix_synthetic': model.mix_synthetic,
            'mix_query_synthetic': model.mix_query_synthetic,
            'mix_warmup_epochs': model.mix_warmup_epochs, 'queue_size': model.queue_size,
            'temperature': model.temperature, 'N < K': model.mix_hardest < model.queue_size}


def mismatches(where: str, ours: dict) -> list:
    """Each row whose paper value is given and differs from ours, named with its source."""
    return [f'{where}: {name} is {ours[name]!r}; the paper gives {want!r} ({source})'
            for name, (want, source) in SOURCES.items()
            if want is not None and name in ours and ours[name] != want]


def test_every_mochi_argument_has_a_source():
    params = inspect.signature(MoCHiMoCo.__init__).parameters
    missing = [name for name in params if name not in ('self', 'kwargs') and name not in SOURCES]
    assert not missing, f'no row in SOURCES for MoCHiMoCo({", ".join(missing)})'
    silent = [name for name, (want, source) in SOURCES.items()
              if (want is None) != source.startswith('silent')]
    assert not silent, f'a row without a paper value must say "silent", one with one not: {silent}'


def test_defaults_match_the_paper_where_it_gives_a_value():
    tiny = Config.fromfile(str(ROOT / 'configs' / 'mochi_r18_tiny.py'))
    failures = (mismatches('MoCHiMoCo', code_defaults())
                + mismatches('mochi_r18_tiny.py', config_values(tiny)))
    assert not failures, '\n'.join(failures)
    # The config restates the method's defaults rather than a row of the paper's grid.
    ours = code_defaults()
    assert all(config_values(tiny)[name] == ours[name] for name in ours if name.startswith('mix_'))


def test_the_digits_demo_keeps_the_hardest_a_part_of_its_queue():
    """Scaled to K = 1024 (N = 64, warm-up 3 of 30 epochs): only the paper's N < K still holds."""
    digits = config_values(Config.fromfile(str(ROOT / 'configs' / 'mochi_r18_digits.py')))
    assert digits['N < K'] is SOURCES['N < K'][0]


def test_the_check_names_a_changed_value():
    changed = dict(code_defaults(), mix_warmup_epochs=15, beta=(0.0, 1.0))
    assert mismatches('MoCHiMoCo', changed) == [
        'MoCHiMoCo: mix_warmup_epochs is 15; the paper gives 10 (sec. 5: no hard negatives are '
        'synthesised in the first 10 epochs on ImageNet-100 (15 on ImageNet-1K))',
        "MoCHiMoCo: beta is (0.0, 1.0); the paper gives (0.0, 0.5) (sec. 4.2: beta_k in (0, 0.5), "
        "so the query's share stays below the negative's (its law is not given: uniform here))"]
    tiny = Config.fromfile(str(ROOT / 'configs' / 'mochi_r18_tiny.py'))
    tiny.model.mix_hardest = tiny.model.queue_size
    assert mismatches('mochi_r18_tiny.py', config_values(tiny)) == [
        'mochi_r18_tiny.py: N < K is False; the paper gives True (sec. 4.1: the hardest are the '
        'first N < K of the queue sorted by similarity)']
