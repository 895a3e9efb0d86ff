# Transfer (paper Table 2): the Tiny-ImageNet ResNet-18 encoder probed on CIFAR-10 with the
# paper's linear protocol (linear_r18_tiny.py), 32-px images upsampled to 224 as the authors do.
# data_root: the folder holding cifar-10-batches-py/.
_base_ = ['./linear_r18_tiny.py']
model = dict(num_classes=10)
train_dataloader = dict(dataset=dict(type='CIFAR10', data_root='data'))
val_dataloader = dict(dataset=dict(type='CIFAR10', data_root='data'))
