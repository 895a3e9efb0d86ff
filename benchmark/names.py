"""The suite's vocabulary: every method, data, protocol and metric name, once.

One table edit adds a method (``METHODS``), a dataset (``DATASETS``) or a protocol
(``PROTOCOLS``); every module that names one of them reads it from here.
"""
import re
from typing import Dict, Tuple

# Registered model type -> (record name, table label). Order = leaderboard order.
METHODS: Dict[str, Tuple[str, str]] = {
    'Supervised': ('supervised', 'supervised'),
    'MoCo': ('mocov2', 'MoCo-v2'),
    'MixCoMoCo': ('mixco', 'MixCo (MoCo-v2)'),
    'IMixMoCo': ('imix', 'i-Mix (MoCo-v2)'),
    'UnMixMoCo': ('unmix', 'Un-Mix (MoCo-v2)'),
    'MoCHiMoCo': ('mochi', 'MoCHi (MoCo-v2)'),
    'SimCLR': ('simclr', 'SimCLR'),
    'MixCoSimCLR': ('mixco_simclr', 'MixCo (SimCLR)'),
}
RANDOM_INIT = 'random_init'  # the record name of an untrained encoder
RANDOM_INIT_LABEL = 'random init'
# Registered models that evaluate a pretrained encoder rather than pretrain one: no records.
EVALUATION_MODELS = ('LinearProbe',)
METHOD_NAMES = {kind: name for kind, (name, _) in METHODS.items()}
METHOD_LABELS = {name: label for name, label in METHODS.values()}
METHOD_ORDER = ('supervised', RANDOM_INIT, *[n for n in METHOD_NAMES.values() if n != 'supervised'])
# Each MixCo variant and the baseline it is compared with (Δ columns, paired differences).
BASELINES = {'mixco': 'mocov2', 'imix': 'mocov2', 'unmix': 'mocov2', 'mochi': 'mocov2',
             'mixco_simclr': 'simclr'}

# Registered dataset type -> (record name, suffix of its configs/eval/linear_r18_<suffix>.py
# or None where the suite ships no linear config).
DATASETS: Dict[str, Tuple[str, object]] = {
    'TinyImageNet': ('tiny-imagenet', 'tiny'),
    'CIFAR10': ('cifar10', 'cifar10'),
    'CIFAR100': ('cifar100', 'cifar100'),
    'Digits': ('digits', 'digits'),
    'ImageFolderDataset': ('imagefolder', None),
    'ImageNet': ('imagenet', None),  # configs/eval/linear_r50_imagenet.py: pass --linear-config
}
DATA_NAMES = {kind: name for kind, (name, _) in DATASETS.items()}
DATA_TYPES = {name: kind for kind, name in DATA_NAMES.items()}
LINEAR_CONFIG_SUFFIX = {name: suffix for name, suffix in DATASETS.values() if suffix}
# Other spellings of a dataset (the paper's CSV, user input) -> its record name.
DATA_ALIASES = {'tiny': 'tiny-imagenet', 'tiny_imagenet': 'tiny-imagenet',
                'tinyimagenet': 'tiny-imagenet', 'tiny-imagenet-200': 'tiny-imagenet',
                'cifar-10': 'cifar10', 'cifar-100': 'cifar100'}

# Protocol (as requested and as recorded) -> table label.
PROTOCOLS = {
    'knn': 'kNN',
    'linear_fast': 'linear (fast, cached features)',
    'linear_paper': 'linear (paper protocol)',
    'cluster': 'cluster indices',
    'cluster_tsne': 'cluster indices (t-SNE 2-D)',
    'supervised': 'supervised',
    'online_linear': 'linear, online (during pretraining)',
}
# The order of protocols in tables (the paper's protocol first).
PROTOCOL_ORDER = ('supervised', 'linear_paper', 'linear_fast', 'knn', 'online_linear', 'cluster',
                  'cluster_tsne')
# Measured during pretraining (a head trained alongside the encoder), never after it: tables
# label them apart from the offline protocols above.
ONLINE_PROTOCOLS = ('online_linear',)
# Older spellings accepted on the command line (records always hold the canonical name).
PROTOCOL_ALIASES = {'tsne': 'cluster_tsne'}
# The protocols computed on cached features (benchmark.evaluation.protocols).
FEATURE_PROTOCOLS = ('knn', 'linear_fast', 'cluster', 'cluster_tsne')
# What tools/train.py evaluates after pretraining, and tools/eval.py by default.
DEFAULT_PROTOCOLS = FEATURE_PROTOCOLS
# The paper's CSV names only its linear protocol.
PAPER_PROTOCOLS = {'linear': 'linear_paper'}
# The paper's CSV names the base method plus a mixco yes/no flag.
PAPER_MIXCO = {'mocov2': 'mixco', 'simclr': 'mixco_simclr'}

ACCURACY = ('top1', 'top5')
CLUSTER = ('davies_bouldin', 'calinski_harabasz', 'kmeans_nmi', 'kmeans_ari')
METRICS = ACCURACY + CLUSTER
METRIC_FORMATS = dict(top1='.2f', top5='.2f', davies_bouldin='.3f', calinski_harabasz='.1f',
                      kmeans_nmi='.3f', kmeans_ari='.3f')
STATUSES = ('ok', 'diverged', 'failed')


def protocol_name(name: str) -> str:
    """The canonical protocol name of a requested one ('tsne' -> 'cluster_tsne').

    Raises:
        ValueError: For a name that is no protocol.
    """
    name = PROTOCOL_ALIASES.get(name, name)
    if name not in PROTOCOLS:
        raise ValueError(f'unknown protocol {name!r}; choose from {sorted(PROTOCOLS)}')
    return name


def method_label(name: str) -> str:
    """The table label of a method's record name ('mixco' -> 'MixCo (MoCo-v2)', random_init ->
    'random init'); a name the vocabulary does not know (a method only the paper ran) as it is."""
    return RANDOM_INIT_LABEL if name == RANDOM_INIT else METHOD_LABELS.get(name, name)


def protocol_family(protocol: str) -> str:
    """'cluster' for the cluster-index protocols, else 'classification'."""
    return 'cluster' if protocol.startswith('cluster') else 'classification'


def canonical_data(name: str) -> str:
    """One spelling per dataset, so records and the paper's rows share groups."""
    low = str(name).strip().lower()
    return DATA_ALIASES.get(low, low)


def canonical_backbone(name: str) -> str:
    """'r18', 'ResNet-18', 'resnet_18' -> 'resnet18'; other names lower-cased."""
    low = str(name).strip().lower()
    match = re.fullmatch(r'(?:r|resnet)[-_]?(\d+)', low)
    return f'resnet{match.group(1)}' if match else low
