# The mix family on digits, on a CPU: MoCo-v2, MixCo, i-Mix, Un-Mix and MoCHi (the _digits
# configs: ResNet-18 at 16 px, 30 epochs), 2 seeds, 2 processes per run, the default protocols
# and the online linear probe. About 3 minutes per run on 2 free cores (10 runs, MoCo-v2 and
# MixCo included: the demo's runs are another setting, one process of 64, and would not count).
configs = [
    'configs/mocov2_r18_digits.py',
    'configs/mixco_r18_digits.py',
    'configs/imix_r18_digits.py',
    'configs/unmix_r18_digits.py',
    'configs/mochi_r18_digits.py',
]
seeds = [0, 1]
procs = 2
evaluations = ['default']
