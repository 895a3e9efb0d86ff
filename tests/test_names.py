"""benchmark.names: the vocabulary agrees with the registries, the configs and itself."""
import pytest
from mmengine.config import Config
from mmengine.registry import DATASETS, MODELS

import benchmark.data  # noqa: F401  registers the datasets
import methods  # noqa: F401  registers the models
from benchmark import names
from benchmark.layout import EVAL_CONFIG_DIR


def test_method_types_are_registered_models():
    for kind in names.METHODS:
        assert MODELS.get(kind) is getattr(methods, kind), kind


def test_dataset_types_are_registered_datasets():
    for kind in names.DATASETS:
        assert DATASETS.get(kind) is getattr(benchmark.data, kind), kind


@pytest.mark.parametrize('name,suffix', sorted(names.LINEAR_CONFIG_SUFFIX.items()))
def test_every_linear_suffix_has_its_config_reading_that_dataset(name, suffix):
    path = EVAL_CONFIG_DIR / f'linear_r18_{suffix}.py'
    assert path.is_file(), path
    cfg = Config.fromfile(str(path))
    assert cfg.train_dataloader.dataset.type == names.DATA_TYPES[name]


def test_linear_suffixes_and_eval_configs_correspond():
    suffixes = names.LINEAR_CONFIG_SUFFIX
    assert {'tiny-imagenet': 'tiny', 'cifar10': 'cifar10', 'cifar100': 'cifar100',
            'digits': 'digits'}.items() <= suffixes.items()
    assert names.DATASETS['ImageFolderDataset'][1] is None
    assert 'imagefolder' not in suffixes  # no linear config shipped for it
    shipped = {p.stem[len('linear_r18_'):] for p in EVAL_CONFIG_DIR.glob('linear_r18_*.py')}
    assert shipped == set(suffixes.values())


def test_derived_tables_invert_each_other():
    assert {names.DATA_TYPES[v]: v for v in names.DATA_NAMES.values()} == names.DATA_NAMES
    assert set(names.DATA_ALIASES.values()) <= set(names.DATA_NAMES.values())
    assert names.DATA_ALIASES['tiny'] == 'tiny-imagenet'
    assert names.METHOD_NAMES['MixCoMoCo'] == 'mixco'
    assert names.METHOD_LABELS['mocov2'] == 'MoCo-v2'
    # supervised, then the untrained encoder, then every method once, in the table's order
    order = names.METHOD_ORDER
    assert order[:2] == ('supervised', names.RANDOM_INIT)
    assert sorted(order[2:]) == sorted(set(names.METHOD_NAMES.values()) - {'supervised'})
    assert order.index('mocov2') < order.index('mixco') and order.index('simclr') < order.index(
        'mixco_simclr')


def test_baselines_are_methods_and_match_the_papers_mixco_flag():
    methods_ = set(names.METHOD_ORDER)
    assert names.BASELINES['mixco'] == 'mocov2' and names.BASELINES['mixco_simclr'] == 'simclr'
    for variant, baseline in names.BASELINES.items():
        assert {variant, baseline} <= methods_ and baseline not in names.BASELINES
    # the paper's CSV: base method + mixco=yes -> the MixCo variant compared with that base
    for base, variant in names.PAPER_MIXCO.items():
        assert names.BASELINES[variant] == base


def test_protocol_name_canonicalises_and_rejects():
    assert names.protocol_name('tsne') == 'cluster_tsne'
    for protocol in names.PROTOCOLS:
        assert names.protocol_name(protocol) == protocol
    with pytest.raises(ValueError, match=r"^unknown protocol 'linear'; choose from \["):
        names.protocol_name('linear')


def test_protocol_tables_agree():
    assert sorted(names.PROTOCOL_ORDER) == sorted(names.PROTOCOLS)
    assert len(set(names.PROTOCOL_ORDER)) == len(names.PROTOCOL_ORDER)
    assert set(names.FEATURE_PROTOCOLS) <= set(names.PROTOCOLS)
    assert set(names.PAPER_PROTOCOLS.values()) <= set(names.PROTOCOLS)
    assert set(names.PROTOCOL_ALIASES.values()) <= set(names.PROTOCOLS)
    assert [names.protocol_family(p) for p in names.PROTOCOL_ORDER] == [
        'classification'] * 5 + ['cluster'] * 2
    # Online protocols (measured during pretraining) are protocols with their own label.
    assert set(names.ONLINE_PROTOCOLS) <= set(names.PROTOCOLS) - set(names.FEATURE_PROTOCOLS)
    assert all('online' in names.PROTOCOLS[p] for p in names.ONLINE_PROTOCOLS)


def test_metric_tables_agree():
    assert names.METRICS == names.ACCURACY + names.CLUSTER
    assert set(names.METRIC_FORMATS) == set(names.METRICS)
    assert format(12.3456, names.METRIC_FORMATS['top1']) == '12.35'
    assert names.STATUSES == ('ok', 'diverged', 'failed')
