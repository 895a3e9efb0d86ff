# Tiny-ImageNet-200 as the official zip unpacks (tools/prepare_data.py tiny --root data).
# The authors upsample the 64-px images to 224 with RandomResizedCrop(224, scale 0.2-1) and keep
# the ImageNet-stem ResNet. batch_size is per process: 64 x 2 GPUs = the paper's 128. The view
# is a dict so that a config can override one setting (view=dict(name='simclr', min_scale=0.2)).
train_dataloader = dict(
    batch_size=64,
    num_workers=4,
    persistent_workers=True,
    drop_last=True,  # MixCo pairs the two halves of every batch: keep batches full and even
    sampler=dict(type='ResumableSampler', shuffle=True),  # resumes mid-epoch, seeds views
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='TinyImageNet', data_root='data/tiny-imagenet-200', split='train',
                 input_size=224, view=dict(name='mocov2')),
)
# Where the training views are drawn: 'auto' draws them on the GPU when the run trains on one
# (the workers only decode; GPUViewPreprocessor draws every image's views with its own
# parameters, distributed as the PIL path's), and with PIL in the loader workers on a CPU;
# on='loader' keeps PIL anywhere, on='device' draws them on the model's device anywhere.
train_views = dict(on='auto')
