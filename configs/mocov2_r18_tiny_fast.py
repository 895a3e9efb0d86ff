# MoCo-v2, ResNet-18, Tiny-ImageNet, 100 epochs, with the speed switches on: views drawn on the
# device, bfloat16 autocast and channels_last. Same hyperparameters as mocov2_r18_tiny.py; only the arithmetic differs
# (contrastive logits, MixCo's soft-target loss and the queue stay float32, methods/precision.py).
_base_ = ['./mocov2_r18_tiny.py']
# bfloat16 autocast; CPUCapableAmpOptimWrapper = mmengine's AmpOptimWrapper that also runs without
# a GPU (benchmark/engine/compat.py). bfloat16 needs no loss scaling: the scaler is off (no inf check).
optim_wrapper = dict(type='CPUCapableAmpOptimWrapper', dtype='bfloat16',
                     loss_scale=dict(enabled=False))
# channels_last (NHWC) weights and image batches (benchmark/engine/channels_last.py). The list repeats
# configs/_base_/runtime/default.py's hooks: mmengine replaces lists instead of merging them.
custom_hooks = [dict(type='RunInfoHook'), dict(type='KNNMonitorHook', interval=10),
                dict(type='NaNGuardHook'), dict(type='PreemptionHook'),
                dict(type='ChannelsLastHook')]
# Views on the device: the loader workers only decode the 64-px images (raw_uint8); the model's
# GPUViewPreprocessor draws both MoCo-v2 views per sample on the GPU (benchmark/data/gpu_views.py),
# with the PIL path's distributions. Its input_size follows the dataset's (224).
train_dataloader = dict(dataset=dict(view='raw_uint8'))
model = dict(data_preprocessor=dict(type='GPUViewPreprocessor', view='mocov2'))
# torch.compile stays off: `custom_hooks = _base_.custom_hooks + [dict(type='CompileHook')]`
# in a config built on this one compiles the encoders
# (benchmark/engine/compile_hook.py; mmengine's `compile = True` fails on torch 2.11 with AMP).
