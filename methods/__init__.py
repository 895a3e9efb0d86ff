"""The algorithms: encoders, MoCo-v2, SimCLR, MixCo and its siblings (i-Mix, Un-Mix, MoCHi),
and the supervised baseline.

Importing this package registers every model in mmengine's MODELS registry.
"""
from .backbones import build_resnet
from .mixco import MixCoLoss, Mixer, mix_pairs, mix_targets, mixco_loss, sample_lambda
from .mixco_moco import MixCoMoCo
from .imix import IMixMoCo
from .unmix import UnMixMoCo
from .mochi import MoCHiMoCo
from .mixco_simclr import MixCoSimCLR
from .moco import MoCo, info_nce
from .simclr import SimCLR
from .supervised import Supervised

__all__ = [
    'build_resnet', 'MixCoLoss', 'Mixer', 'mix_pairs', 'mix_targets', 'mixco_loss',
    'sample_lambda', 'MixCoMoCo', 'MixCoSimCLR', 'MoCo', 'info_nce', 'SimCLR', 'Supervised',
    'IMixMoCo', 'UnMixMoCo', 'MoCHiMoCo',
]
