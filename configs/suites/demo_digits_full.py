# The demo suite at ResNet-18's full width (`make demo DEMO=demo_digits_full`): the same runs as
# configs/suites/demo_digits.py with 512-channel features, several times its time on a CPU.
configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']
seeds = [0, 1, 2]
procs = 1
cfg_options = {'train_dataloader.batch_size': 64}
evaluations = ['default']
