# MixCo on SimCLR, ResNet-18, Tiny-ImageNet, 100 epochs (authors' SimCLR scripts: tau_mix 0.5).
_base_ = ['./simclr_r18_tiny.py']
model = dict(type='MixCoSimCLR', mix_temperature=0.5, mix_weight=1.0)  # tau_mix, beta
