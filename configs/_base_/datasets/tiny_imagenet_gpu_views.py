# Tiny-ImageNet-200 with the views drawn on the device: a drop-in for tiny_imagenet.py in a
# config's _base_. The loader workers only decode the 64-px JPEGs (view='raw_uint8'); the
# model's GPUViewPreprocessor (benchmark/data/gpu_views.py) draws the two MoCo-v2 views of
# every image on the GPU, each with its own random parameters, distributed as the PIL path's.
# Its input_size follows train_dataloader.dataset.input_size (tools/train.py fills it in).
# SimCLR: model = dict(data_preprocessor=dict(view='simclr')) in the experiment config.
_base_ = ['./tiny_imagenet.py']
train_dataloader = dict(dataset=dict(view='raw_uint8'))
model = dict(data_preprocessor=dict(type='GPUViewPreprocessor', view='mocov2'))
