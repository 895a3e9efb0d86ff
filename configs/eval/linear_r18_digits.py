# The paper's linear protocol shrunk for the digits demo (not a paper setting): 32 px, 10 epochs
# with the lr steps at the same fractions (0.6, 0.8), batch 128 (lr 3.0 x 128 / 256 = 1.5 by
# auto_scale_lr). The ImageNet stem as in the demo's pretraining configs.
_base_ = ['./linear_r18_tiny.py']
model = dict(num_classes=10)
train_dataloader = dict(batch_size=128, num_workers=1,
                        dataset=dict(type='Digits', data_root='', input_size=32))
val_dataloader = dict(batch_size=128, num_workers=1,
                      dataset=dict(type='Digits', data_root='', input_size=32))
param_scheduler = [dict(type='MultiStepLR', by_epoch=True, begin=0, milestones=[6, 8],
                        gamma=0.1)]
train_cfg = dict(max_epochs=10, val_interval=5)
default_hooks = dict(logger=dict(interval=5))
