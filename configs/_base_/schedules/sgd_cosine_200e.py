# The ResNet-34/50 runs of the paper's Table 1: 200 epochs, otherwise as sgd_cosine_100e.
_base_ = ['./sgd_cosine_100e.py']
train_cfg = dict(max_epochs=200)
