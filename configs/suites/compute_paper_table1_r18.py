# The paper's Table 1 self-supervised rows for ResNet-18 on Tiny-ImageNet (MoCo-v2, MixCo, SimCLR
# and MixCo on SimCLR; 100 epochs, total batch 128 on 2 GPUs, 3 seeds each) in two regimes: at
# the paper's equal 100 epochs and at equal training compute, each method at the whole number of
# epochs whose training FLOPs come nearest MoCo-v2's at 100 (MixCo about 73, SimCLR 67, MixCo on
# SimCLR 45; docs/suites.md#runs-at-equal-training-compute). Evaluations as paper_table1_r18's.
# The plan counts one real training step of each config on the CPU (minutes on a small one), so
# the data must be in place before it, --dry-run included:
# tools/prepare_data.py tiny --root data; ... cifar10 --root data; ... cifar100 --root data.
# On SLURM: tools/run_suite.py compute_paper_table1_r18 --launcher slurm --partition NAME
_base_ = ['paper_table1_r18.py']  # its seeds, processes, evaluations and SLURM time
configs = [
    'configs/mocov2_r18_tiny.py',
    'configs/mixco_r18_tiny.py',
    'configs/simclr_r18_tiny.py',
    'configs/mixco_simclr_r18_tiny.py',
]
budget = dict(baseline='configs/mocov2_r18_tiny.py', epochs=100)
