# MoCo-v2, ResNet-18, Tiny-ImageNet, 400 epochs (paper Table 6, "pretraining with longer
# epochs"): mocov2_r18_tiny.py with the cosine schedule stretched over 400 epochs.
_base_ = ['./mocov2_r18_tiny.py']
train_cfg = dict(max_epochs=400)
