# MixCo on MoCo-v2, ResNet-34, Tiny-ImageNet, 200 epochs (paper Table 1).
_base_ = ['./mocov2_r34_tiny.py']
model = dict(type='MixCoMoCo', mix_temperature=0.05, mix_weight=1.0)  # tau_mix, beta
