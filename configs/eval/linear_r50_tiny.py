# The paper's linear evaluation of a ResNet-50 encoder on Tiny-ImageNet (linear_r18_tiny.py).
_base_ = ['./linear_r18_tiny.py']
model = dict(backbone=dict(depth=50, small_stem=False))
