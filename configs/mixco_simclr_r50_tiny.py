# MixCo on SimCLR, ResNet-50, Tiny-ImageNet, 200 epochs (authors' SimCLR scripts: tau_mix 0.5).
_base_ = ['./simclr_r50_tiny.py']
model = dict(type='MixCoSimCLR', mix_temperature=0.5, mix_weight=1.0)  # tau_mix, beta
