# MixCo on MoCo-v2, ResNet-18, Tiny-ImageNet, 400 epochs (paper Table 6).
_base_ = ['./mocov2_r18_tiny_400e.py']
model = dict(type='MixCoMoCo', mix_temperature=0.05, mix_weight=1.0)  # tau_mix, beta
