# ImageNet (ILSVRC-2012) as an ImageFolder tree: <data_root>/train/<wnid>/*.JPEG and, for the
# kNN monitor and evaluation, <data_root>/val/<wnid>/*.JPEG (the validation images sorted into
# class folders, as torchvision's ImageFolder and the authors' loader expect).
# batch_size is per process: 32 x 8 GPUs = the paper's total batch of 256 (Table 5).
train_dataloader = dict(
    batch_size=32,
    num_workers=4,  # the authors' 32 loader workers over 8 processes
    persistent_workers=True,
    drop_last=True,  # MixCo pairs the two halves of every batch: keep batches full and even
    sampler=dict(type='ResumableSampler', shuffle=True),  # resumes mid-epoch, seeds views
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='ImageNet', data_root='data/imagenet', split='train',
                 input_size=224, view=dict(name='mocov2')),
)
# Where the training views are drawn: 'auto' draws them on the GPU when the run trains on one
# (the workers only decode; GPUViewPreprocessor draws every image's views with its own
# parameters, distributed as the PIL path's), and with PIL in the loader workers on a CPU;
# on='loader' keeps PIL anywhere, on='device' draws them on the model's device anywhere.
# ImageNet's images differ in size: on the device each is first resized (shorter side 256,
# PIL bilinear) and centre-cropped to 256 x 256 in the workers, so the crops see that square.
train_views = dict(on='auto', raw_size=256)
