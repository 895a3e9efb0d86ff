# MoCo-v2, ResNet-50, Tiny-ImageNet, 200 epochs: the baseline rows of the paper's Table 1.
# The ResNet-18 recipe with the paper's 200-epoch schedule for deeper encoders.
_base_ = ['./mocov2_r18_tiny.py']
train_cfg = dict(max_epochs=200)
model = dict(backbone=dict(depth=50))
