# Ablation of MixCo on digits: one factor at a time away from the demo's MixCo
# (configs/mixco_r18_digits.py: tau_mix 0.2, beta 1, lambda ~ U(0,1) per pair, halves paired),
# 3 seeds, compared with MoCo-v2 seed by seed. One process per run with the total batch of 64,
# the demo's setting (configs/suites/demo_digits.py says why it is the same computation as
# 2 processes x 32): two runs at a time end sooner on 2 CPU cores than one run of 2 processes.
# The baseline MoCo-v2 and MixCo runs are trained here, under this suite's name.
# Every variant is its own row, labelled with its override; none is picked for a result.
configs = [
    'configs/mocov2_r18_digits.py',  # the baseline of every paired comparison
    'configs/mixco_r18_digits.py',   # the demo's MixCo
    dict(config='configs/mixco_r18_digits.py', grid=[
        {'model.mix_temperature': [0.05]},                      # tau_mix: the paper's value
        {'model.mix_weight': [0.5, 2.0]},                       # beta, the weight of L_mix
        {'model.mix_lambda': ['beta'], 'model.mix_alpha': [0.2]},  # lambda ~ Beta(0.2, 0.2)
        {'model.mix_lambda_scope': ['batch']},                  # one lambda per step
        {'model.mix_pairing': ['permutation']},                 # random pairs, not the halves
    ]),
]
seeds = [0, 1, 2]
procs = 1
cfg_options = {'train_dataloader.batch_size': 64}
evaluations = ['default']
