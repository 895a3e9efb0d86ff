# The paper's linear evaluation (docs/design.md, "The paper's hyperparameters and their sources";
# MoCo's main_lincls.py, which the MixCo authors follow) of a ResNet-18 encoder on
# Tiny-ImageNet-200: frozen encoder in eval mode, 100 epochs, SGD lr 3.0 momentum 0.9 weight
# decay 0, lr x0.1 at epochs 60 and 80, batch 256, RandomResizedCrop + flip for training and
# resize + center crop for test, 224 px as the authors upsample. Set model.checkpoint and
# train_dataloader.dataset.data_root (tools/eval.py --protocols linear_paper does; the val split
# is read from the same root).
_base_ = ['../_base_/runtime/default.py']
custom_imports = dict(imports=['methods', 'benchmark.components'], allow_failed_imports=False)
# No kNN monitor: the encoder is frozen, it would log the same number every time.
custom_hooks = [dict(type='RunInfoHook')]

model = dict(
    type='LinearProbe',
    num_classes=200,
    backbone=dict(depth=18, small_stem=False),  # must match the pretraining config
    checkpoint=None,  # the pretrained encoder; None probes the random init
)
# batch_size is per process: one process gives the paper's 256; with N processes
# auto_scale_lr rescales lr linearly to the total batch N x batch_size.
train_dataloader = dict(
    batch_size=256,
    num_workers=4,
    persistent_workers=True,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='TinyImageNet', data_root='data/tiny-imagenet-200', split='train',
                 input_size=224, view='linear_train'),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=4,
    persistent_workers=True,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='TinyImageNet', data_root='data/tiny-imagenet-200', split='val',
                 input_size=224, view='test'),
)
val_evaluator = dict(type='LinearAccuracy', topk=(1, 5))

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='SGD', lr=3.0, momentum=0.9, weight_decay=0.0),
)
param_scheduler = [dict(type='MultiStepLR', by_epoch=True, begin=0, milestones=[60, 80],
                        gamma=0.1)]
# The reported number is the final epoch's; the val loop also runs every 10 epochs to log
# the curve (and always after the last epoch).
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=100, val_interval=10)
val_cfg = dict(type='ValLoop')
auto_scale_lr = dict(enable=True, base_batch_size=256)
