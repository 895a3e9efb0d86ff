# MoCo-v2 schedule (paper: "other hyperparameters as MoCo-v2"): SGD, cosine decay per epoch.
# lr 0.015 is for a total batch of 128 (2 GPUs x 64); auto_scale_lr rescales it linearly when
# the total batch (processes x train_dataloader.batch_size) differs.
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='SGD', lr=0.015, momentum=0.9, weight_decay=1e-4),
)
# No `end`/`T_max`: mmengine sets them to train_cfg.max_epochs, so overriding the epochs keeps
# a full cosine.
param_scheduler = [dict(type='CosineAnnealingLR', by_epoch=True, begin=0, eta_min=0.0)]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=100)
auto_scale_lr = dict(enable=True, base_batch_size=128)
