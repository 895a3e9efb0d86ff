# scikit-learn's bundled digits (1,797 8x8 grey images, 10 classes): real data that ships with
# a dependency, for the demo and for runs with no download. 8x8 images are upsampled to
# input_size by the view's RandomResizedCrop.
train_dataloader = dict(
    batch_size=64,
    num_workers=1,
    persistent_workers=True,
    drop_last=True,
    sampler=dict(type='ResumableSampler', shuffle=True),  # resumes mid-epoch, seeds views
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='Digits', data_root='', split='train', input_size=32, view=dict(name='mocov2')),
)
