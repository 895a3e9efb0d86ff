# MoCo-v2, ResNet-50, ImageNet, 200 epochs: the baseline of the paper's Table 5 (authors'
# moco/experiments/exp_moco_res50_imagenet.sh): total batch 256 on 8 GPUs, lr 0.03, cosine,
# weight decay 1e-4, K 65536, m 0.999, tau 0.2, MoCo-v2 views, MLP head.
_base_ = [
    './_base_/datasets/imagenet.py',
    './_base_/schedules/sgd_cosine_200e.py',
    './_base_/runtime/default.py',
]
optim_wrapper = dict(optimizer=dict(lr=0.03))
auto_scale_lr = dict(enable=True, base_batch_size=256)  # lr 0.03 is for a total batch of 256
model = dict(
    type='MoCo',
    backbone=dict(depth=50, small_stem=False),
    feature_dim=128,
    queue_size=65536,  # K
    key_momentum=0.999,  # m: key = m * key + (1 - m) * query
    temperature=0.2,  # tau
)
