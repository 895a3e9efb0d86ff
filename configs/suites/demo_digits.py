# The demo suite: MoCo-v2 and MixCo on scikit-learn's bundled digits (no download), ResNet-18 at
# 16 px, 30 epochs, 2 CPU processes per run, 3 seeds. `make demo` runs seeds 0 and 1
# (tools/run_suite.py demo_digits --seeds 0 1) to stay within 15 minutes on 2 cores.
# Each run ends with the default protocols (kNN, fast linear, cluster indices, t-SNE); the
# digits configs also train the online linear probe, recorded as 'online_linear'.
configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']
seeds = [0, 1, 2]
procs = 2
evaluations = ['default']
