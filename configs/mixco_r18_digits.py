# MixCo on MoCo-v2, ResNet-18, digits at 16 px: the demo run. Differs from
# mocov2_r18_digits.py only in the MixCo fields. tau_mix is 0.2 here, not the paper's 0.05:
# in this 30-epoch, 1,437-image setting the sharper mix loss dominates the gradient and the
# encoder ends below a random one on kNN (63.9 vs 76.7 in one run; 85.8 with tau_mix 0.2).
_base_ = ['./mocov2_r18_digits.py']
model = dict(type='MixCoMoCo', mix_temperature=0.2, mix_weight=1.0)  # tau_mix, beta
