# MoCo-v2, ResNet-50, Tiny-ImageNet, 200 epochs: the baseline rows of the paper's Table 1.
_base_ = [
    './_base_/datasets/tiny_imagenet.py',
    './_base_/schedules/sgd_cosine_200e.py',
    './_base_/runtime/default.py',
]
model = dict(
    type='MoCo',
    backbone=dict(depth=50, small_stem=False),  # ImageNet stem on 224-px upsampled inputs
    feature_dim=128,
    queue_size=65536,  # K
    key_momentum=0.999,  # m: key = m * key + (1 - m) * query
    temperature=0.2,  # tau
)
