# The paper's Table 1 rows for ResNet-18 (Tiny-ImageNet, 100 epochs, total batch 128 on 2 GPUs):
# supervised, MoCo-v2, MixCo, SimCLR and MixCo on SimCLR, 3 seeds each. After pretraining:
# the default protocols, the authors' linear protocol (linear_paper: 100 epochs, lr 3.0) on
# Tiny-ImageNet, and transfer to CIFAR-10 and CIFAR-100 with the same protocol.
# Data: tools/prepare_data.py tiny --root data; ... cifar10 --root data; ... cifar100 --root data.
# On SLURM: tools/run_suite.py paper_table1_r18 --launcher slurm --partition NAME
configs = [
    'configs/supervised_r18_tiny.py',
    'configs/mocov2_r18_tiny.py',
    'configs/mixco_r18_tiny.py',
    'configs/simclr_r18_tiny.py',
    'configs/mixco_simclr_r18_tiny.py',
]
seeds = [0, 1, 2]
procs = 2
evaluations = [
    'default',
    'linear_paper',
    dict(protocols=['linear_paper'], eval_data='cifar10', data_root='data'),
    dict(protocols=['linear_paper'], eval_data='cifar100', data_root='data'),
]
slurm = dict(time='48:00:00')  # and 5 CPUs per process, 2 GPUs: the defaults
