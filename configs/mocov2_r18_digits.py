# MoCo-v2, ResNet-18, scikit-learn digits upsampled to 16 px: the demo's baseline (minutes on a
# CPU). Not a paper setting; what differs from the paper and why:
# * 1,437 training images instead of 100,000: queue K=1024 (below the image count, so the
#   negatives are other images), key momentum 0.99 (few steps: the key encoder must follow).
# * 8x8 images: input 16 px (the ImageNet stem keeps a step cheap), and milder views than
#   MoCo-v2's: crops keep >= 60% of a digit, no blur, no grey-scale, no flip (a flipped 2 is
#   not a 2). With MoCo-v2's 20% crops the InfoNCE loss stays at log(K+1) for the whole demo.
# * The views are drawn in batches by the model's data preprocessor (GPUViewPreprocessor, on
#   whatever device the model is: the CPU here), every image with its own parameters drawn as
#   the PIL path draws them; the loader only hands out the 8x8 arrays, in the training
#   process (no loader worker sharing its core): the same views, a shorter epoch on a CPU
#   (docs/performance.md, "Where a demo run's time goes").
# * BatchNorm in the projection head (as in MoCo-v3) and a total batch of 64 (more steps in
#   the time): the loss starts falling within the first epochs.
_base_ = [
    './_base_/datasets/digits.py',
    './_base_/schedules/sgd_cosine_100e.py',
    './_base_/runtime/default.py',
]
train_cfg = dict(max_epochs=30)
default_hooks = dict(logger=dict(interval=10))
# mmengine replaces a list from _base_ whole (no per-item merge), so the runtime's hook list is
# restated here to run the kNN monitor every 5 epochs instead of 10 (6 points in 30 epochs) and
# to add the online linear probe (off in the paper configs): a linear head on detached features,
# its val accuracy logged every epoch as online_linear/top1 and recorded as 'online_linear'.
custom_hooks = [dict(type='RunInfoHook'), dict(type='KNNMonitorHook', interval=5),
                dict(type='OnlineLinearProbeHook'),
                dict(type='NaNGuardHook'), dict(type='PreemptionHook')]
optim_wrapper = dict(optimizer=dict(lr=0.06))  # for a total batch of 128; scaled to 64
train_dataloader = dict(
    batch_size=32,  # per process: 2 processes x 32
    num_workers=0,  # the arrays come from memory; the views are drawn by the preprocessor
    persistent_workers=False,
    dataset=dict(input_size=16, view='raw_uint8'),
)
model = dict(
    type='MoCo',
    data_preprocessor=dict(type='GPUViewPreprocessor',
                           view=dict(name='mocov2', min_scale=0.6, gaussian_blur=0.0,
                                     random_gray_scale=0.0, hf_prob=0.0)),
    backbone=dict(depth=18, small_stem=False),
    feature_dim=128,
    queue_size=1024,
    key_momentum=0.99,
    temperature=0.2,
    head_batch_norm=True,
)
