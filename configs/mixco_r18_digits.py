# MixCo on MoCo-v2, ResNet-18, digits at 32 px: the demo run. Differs from
# mocov2_r18_digits.py only in the MixCo fields.
_base_ = ['./mocov2_r18_digits.py']
model = dict(type='MixCoMoCo', mix_temperature=0.05, mix_weight=1.0)  # tau_mix, beta
