# The demo suite: MoCo-v2 and MixCo on scikit-learn's bundled digits (no download), ResNet-18 at
# 16 px, 30 epochs, 3 seeds. `make demo` runs seeds 0 and 1, two runs at a time
# (tools/run_suite.py demo_digits --seeds 0 1 --parallel 2): on 2 CPU cores that ends sooner
# than one run of 2 processes at a time (docs/suites.md has the measured times).
# One process per run with the configs' total batch of 64 (the configs say 32 per process for
# 2 processes): a MoCo-family model in one process splits the key batch into 2 BatchNorm groups,
# the same computation as the key shuffle across 2 processes.
# Each run ends with the default protocols (kNN, fast linear, cluster indices, t-SNE); the
# digits configs also train the online linear probe, recorded as 'online_linear'.
configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']
seeds = [0, 1, 2]
procs = 1
cfg_options = {'train_dataloader.batch_size': 64}
evaluations = ['default']
