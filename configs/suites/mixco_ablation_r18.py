# Ablation of MixCo on MoCo-v2 (ResNet-18, Tiny-ImageNet, 100 epochs, 3 seeds): one factor at a
# time away from the paper's MixCo, through the fields MixCoMoCo exposes (docs/methods.md,
# "MixCo's variants").
# Every variant is its own row, labelled with its override, compared with MoCo-v2 (Δ and the
# paired Δ over seeds) and never averaged with the default MixCo.
configs = [
    'configs/mocov2_r18_tiny.py',  # the baseline of every Δ
    'configs/mixco_r18_tiny.py',  # the paper: tau_mix 0.05, beta 1, lambda ~ U(0,1) per pair,
                                  # halves paired, one joint forward
    dict(config='configs/mixco_r18_tiny.py', grid=[
        {'model.mix_temperature': [0.1, 0.2, 0.5]},  # tau_mix
        {'model.mix_weight': [0.5, 2.0]},  # beta
        {'model.mix_lambda': ['beta'], 'model.mix_alpha': [0.2, 1.0]},  # lambda ~ Beta(a, a)
        {'model.mix_lambda_scope': ['batch']},  # one lambda per step instead of per pair
        {'model.mix_pairing': ['permutation']},  # random pairs instead of the two halves
        {'model.mix_joint_forward': [False]},  # a separate forward pass for mixed images
    ]),
]
seeds = [0, 1, 2]
procs = 2
evaluations = ['default', 'linear_paper']
