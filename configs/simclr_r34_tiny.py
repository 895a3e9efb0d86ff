# SimCLR, ResNet-34, Tiny-ImageNet, 200 epochs (not in the paper's table; the R18 recipe with
# the paper's 200-epoch schedule for deeper encoders).
_base_ = ['./simclr_r18_tiny.py']
train_cfg = dict(max_epochs=200)
# The authors' T_max is the run's epochs (their --epochs): 10 epochs at 0.15, then the cosine.
param_scheduler = [dict(type='CosineAnnealingLR', by_epoch=True, begin=10, end=200, T_max=200,
                       eta_min=0.0)]
model = dict(backbone=dict(depth=34))
