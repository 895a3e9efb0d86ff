# MixCo on MoCo-v2, ResNet-18, Tiny-ImageNet, 100 epochs, with the speed switches of
# mocov2_r18_tiny_fast.py (views on the device, bfloat16 autocast, channels_last).
_base_ = ['./mocov2_r18_tiny_fast.py']
model = dict(type='MixCoMoCo', mix_temperature=0.05, mix_weight=1.0)  # tau_mix, beta
