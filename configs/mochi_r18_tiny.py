# MoCHi on MoCo-v2 (Kalantidis et al., NeurIPS 2020), ResNet-18, Tiny-ImageNet, 100 epochs.
# Differs from mocov2_r18_tiny.py only in the model's type and MoCHi fields: (N, s, s') =
# (1024, 1024, 512) at the same K = 65536, mixing from epoch 10 on.
# NOTE: not a row of the MoCHi paper, which trains ResNet-50 on ImageNet-100 and ImageNet-1K
# only: these are the method's defaults (methods/mochi.py). The sizes are chosen for this setting
# (the paper's Tables 1-2 are a grid of (N, s, s')); the 10 warm-up epochs are its ImageNet-100
# value (sec. 5) and the mixing (alpha in (0, 1), beta in (0, 0.5), sec. 4) is the paper's.
# Sources per default: tests/methods/test_mochi_sources.py.
_base_ = ['./mocov2_r18_tiny.py']
model = dict(type='MoCHiMoCo', mix_hardest=1024, mix_synthetic=1024, mix_query_synthetic=512,
             mix_warmup_epochs=10)
