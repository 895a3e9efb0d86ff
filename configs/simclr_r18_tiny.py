# SimCLR, ResNet-18, Tiny-ImageNet, 100 epochs (paper Table 1), as the MixCo authors' simclr/
# code runs it (scripts/resnet18_batch128_gpu2.sh): total batch 128 on 2 GPUs, lr 0.15, tau 0.5,
# weight decay 1e-6 (their default; the script does not set it), SimCLR's views with their
# crop scale 0.2-1, a pass per view, synchronised BatchNorm, head Linear -> ReLU -> Linear,
# NT-Xent over each process's local batch.
# Learning rate as their simclr/pretrain.py steps torch's CosineAnnealingLR(T_max=epochs,
# eta_min=0) once per epoch, only after epochs 10, 11, ...: epochs 0-10 train at 0.15, epoch e > 10
# at 0.15 * (1 + cos(pi * (e - 10) / T_max)) / 2, never reaching 0. Here mmengine's cosine begins
# at epoch 10 with T_max the run's epochs (100); tests/test_configs.py checks it epoch by epoch.
_base_ = [
    './_base_/datasets/tiny_imagenet.py',
    './_base_/schedules/sgd_cosine_100e.py',
    './_base_/runtime/default.py',
]
train_dataloader = dict(dataset=dict(view=dict(name='simclr', min_scale=0.2)))
optim_wrapper = dict(optimizer=dict(lr=0.15, weight_decay=1e-6))
# end is given, as T_max: a shorter run (a test's few epochs) keeps 0.15 throughout, as theirs would.
param_scheduler = [dict(type='CosineAnnealingLR', by_epoch=True, begin=10, end=100, T_max=100,
                       eta_min=0.0)]
model = dict(
    type='SimCLR',
    backbone=dict(depth=18, small_stem=False),
    feature_dim=128,
    temperature=0.5,  # tau
    # The authors' choices; lightly's SimCLR flips all four.
    joint_forward=False,
    head_batch_norm=False,
    gather_negatives=False,
    sync_bn=True,
)
