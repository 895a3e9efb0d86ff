# The demo suite: MoCo-v2 and MixCo on scikit-learn's bundled digits (no download), ResNet-18 at
# a quarter of its width (16, 32, 64 and 128 channels) and 16 px, 30 epochs, 3 seeds.
# `make demo` runs seeds 0 and 1, two one-process runs at a time
# (tools/run_suite.py demo_digits --seeds 0 1 --parallel 2), and compares them with the published
# records in results/reference/demo_digits/. The quarter width keeps the whole demo to minutes on
# any 2-core CPU (results/reference/demo_digits/times.md) and still trains an encoder well past a
# random one on kNN; configs/suites/demo_digits_full.py is the same suite at full width (slower).
# One process per run with the configs' total batch of 64 (the configs say 32 per process for
# 2 processes): a MoCo-family model in one process splits the key batch into 2 BatchNorm groups,
# the same computation as the key shuffle across 2 processes.
# Each run ends with the default protocols (kNN, fast linear, cluster indices, t-SNE); the
# digits configs also train the online linear probe, recorded as 'online_linear'.
configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']
seeds = [0, 1, 2]
procs = 1
cfg_options = {'train_dataloader.batch_size': 64, 'model.backbone.width': 0.25}
evaluations = ['default']
