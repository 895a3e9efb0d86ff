# The mix-up family compared: MoCo-v2 and the mix-based methods built on it (MixCo, i-Mix, Un-Mix,
# MoCHi), ResNet-18 on Tiny-ImageNet, 100 epochs, 3 seeds; the default protocols and the
# authors' linear protocol. Δ and paired Δ are against MoCo-v2 (benchmark/names.py BASELINES).
configs = [
    'configs/mocov2_r18_tiny.py',
    'configs/mixco_r18_tiny.py',
    'configs/imix_r18_tiny.py',
    'configs/unmix_r18_tiny.py',
    'configs/mochi_r18_tiny.py',
]
seeds = [0, 1, 2]
procs = 2
evaluations = ['default', 'linear_paper']
