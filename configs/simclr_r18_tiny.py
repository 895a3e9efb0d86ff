# SimCLR, ResNet-18, Tiny-ImageNet, 100 epochs (paper Table 1; authors' lr 0.15, tau 0.5).
_base_ = [
    './_base_/datasets/tiny_imagenet.py',
    './_base_/schedules/sgd_cosine_100e.py',
    './_base_/runtime/default.py',
]
train_dataloader = dict(dataset=dict(view='simclr'))
optim_wrapper = dict(optimizer=dict(lr=0.15))
model = dict(
    type='SimCLR',
    backbone=dict(depth=18, small_stem=False),
    feature_dim=128,
    temperature=0.5,  # tau
)
