# i-Mix on MoCo-v2 (Lee et al., ICLR 2021), ResNet-18, Tiny-ImageNet, 100 epochs. Differs from
# mocov2_r18_tiny.py only in the model's type and i-Mix fields (tau = 0.2 as in the authors' MoCo
# runs). alpha = 1 is the authors' CIFAR setting; their ImageNet runs use 0.2.
_base_ = ['./mocov2_r18_tiny.py']
model = dict(type='IMixMoCo', mix_alpha=1.0, mix_lambda_scope='pair', mix_lambda_fold=True)
