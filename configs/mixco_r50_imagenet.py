# MixCo on MoCo-v2, ResNet-50, ImageNet, 200 epochs (paper Table 5: 68.4% linear top-1;
# authors' moco/experiments/exp_mix_res50_imagenet.sh): tau_mix 1 on ImageNet, beta 1.
_base_ = ['./mocov2_r50_imagenet.py']
model = dict(type='MixCoMoCo', mix_temperature=1.0, mix_weight=1.0)  # tau_mix, beta
