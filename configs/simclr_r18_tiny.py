# SimCLR, ResNet-18, Tiny-ImageNet, 100 epochs (paper Table 1), as the MixCo authors' simclr/
# code runs it (scripts/resnet18_batch128_gpu2.sh): total batch 128 on 2 GPUs, lr 0.15, tau 0.5,
# weight decay 1e-6 (their default; the script does not set it), SimCLR's views with their
# crop scale 0.2-1, a pass per view, synchronised BatchNorm, head Linear -> ReLU -> Linear,
# NT-Xent over each process's local batch.
# NOTE: their scheduler keeps lr 0.15 for the first 10 epochs and then decays it by a cosine
# with T_max = 100 epochs (never reaching 0); here the cosine runs over all 100 epochs.
_base_ = [
    './_base_/datasets/tiny_imagenet.py',
    './_base_/schedules/sgd_cosine_100e.py',
    './_base_/runtime/default.py',
]
train_dataloader = dict(dataset=dict(view=dict(name='simclr', min_scale=0.2)))
optim_wrapper = dict(optimizer=dict(lr=0.15, weight_decay=1e-6))
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
