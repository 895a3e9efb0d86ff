# Supervised baseline, ResNet-18, Tiny-ImageNet, 100 epochs (the "Supervised" rows of Table 1).
# The paper gives no recipe for these rows; this one is ours: the pretraining schedule with
# lr 0.05 for batch 128 (0.1 per 256, the usual ResNet recipe), RandomResizedCrop + flip.
_base_ = [
    './_base_/datasets/tiny_imagenet.py',
    './_base_/schedules/sgd_cosine_100e.py',
    './_base_/runtime/default.py',
]
train_dataloader = dict(dataset=dict(view='linear_train'))
optim_wrapper = dict(optimizer=dict(lr=0.05))
model = dict(type='Supervised', num_classes=200, backbone=dict(depth=18, small_stem=False))
