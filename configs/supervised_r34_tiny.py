# Supervised baseline, ResNet-34, Tiny-ImageNet, 200 epochs (the "Supervised" rows of Table 1):
# the ResNet-18 recipe (ours; the paper gives none) with the 200-epoch schedule.
_base_ = ['./supervised_r18_tiny.py']
train_cfg = dict(max_epochs=200)
model = dict(backbone=dict(depth=34))
