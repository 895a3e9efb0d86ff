# The paper's linear evaluation on ImageNet (Table 5; authors' exp_*_res50_imagenet.sh lincls):
# frozen ResNet-50 in eval mode, 100 epochs, SGD lr 30 momentum 0.9 weight decay 0, lr x0.1 at
# epochs 60 and 80, total batch 256, RandomResizedCrop + flip / resize 256 + center crop 224.
# data_root: the ImageFolder tree with train/ and val/ (val sorted into class folders).
# batch_size is per process (as in linear_r18_tiny.py): one process gives the paper's 256;
# with 8 processes set train_dataloader.batch_size=32 to keep it (auto_scale_lr would
# otherwise raise lr to 30 x 2048 / 256).
_base_ = ['./linear_r18_tiny.py']
model = dict(num_classes=1000, backbone=dict(depth=50, small_stem=False))
train_dataloader = dict(dataset=dict(type='ImageNet', data_root='data/imagenet'))
val_dataloader = dict(dataset=dict(type='ImageNet', data_root='data/imagenet'))
optim_wrapper = dict(optimizer=dict(lr=30.0))
