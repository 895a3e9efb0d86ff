# MoCo-v2, ResNet-18, scikit-learn digits upsampled to 32 px: the demo's baseline (minutes on a
# CPU). Not a paper setting: queue, epochs and input size are shrunk to fit the 1,437 training
# images; the ImageNet stem keeps a 32-px step cheap.
_base_ = [
    './_base_/datasets/digits.py',
    './_base_/schedules/sgd_cosine_100e.py',
    './_base_/runtime/default.py',
]
train_cfg = dict(max_epochs=15)
default_hooks = dict(logger=dict(interval=5))
model = dict(
    type='MoCo',
    backbone=dict(depth=18, small_stem=False),
    feature_dim=128,
    queue_size=1024,  # K: below the 1,437 training images so negatives are other samples
    key_momentum=0.99,  # m: fewer steps than a paper run, so the key encoder follows faster
    temperature=0.2,
)
