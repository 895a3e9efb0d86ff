# Un-Mix on MoCo-v2 (Shen et al., AAAI 2022), ResNet-18, Tiny-ImageNet, 100 epochs. Differs
# from mocov2_r18_tiny.py only in the model's type and Un-Mix fields: lam ~ Beta(1, 1), global
# and region-level mixtures alternating step by step.
_base_ = ['./mocov2_r18_tiny.py']
model = dict(type='UnMixMoCo', mix_alpha=1.0, mix_schedule='alternate')
