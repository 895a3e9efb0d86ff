# SimCLR, ResNet-34, Tiny-ImageNet, 200 epochs (not in the paper's table; the R18 recipe with
# the paper's 200-epoch schedule for deeper encoders).
_base_ = ['./simclr_r18_tiny.py']
train_cfg = dict(max_epochs=200)
model = dict(backbone=dict(depth=34))
