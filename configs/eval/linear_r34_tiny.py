# The paper's linear evaluation of a ResNet-34 encoder on Tiny-ImageNet (linear_r18_tiny.py).
_base_ = ['./linear_r18_tiny.py']
model = dict(backbone=dict(depth=34, small_stem=False))
