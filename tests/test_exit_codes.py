"""The exit codes live in benchmark/exit_codes.py; the modules that raise them re-export the
same values, and each code means one thing."""
from benchmark import cli, exit_codes
from benchmark.engine import checkpoint_hook, nan_guard, preemption, work_dir_lock


def test_each_code_is_one_value_and_the_modules_that_use_it_agree():
    codes = {name: value for name, value in vars(exit_codes).items() if name.endswith('_CODE')}
    assert len(set(codes.values())) == len(codes) == 5
    assert all(1 < value < 256 for value in codes.values())
    assert cli.BAD_INPUT_EXIT_CODE == codes['BAD_INPUT_EXIT_CODE'] == 2
    assert nan_guard.DIVERGED_EXIT_CODE == codes['DIVERGED_EXIT_CODE']
    assert checkpoint_hook.DISK_FULL_EXIT_CODE == codes['DISK_FULL_EXIT_CODE']
    assert work_dir_lock.WORK_DIR_BUSY_EXIT_CODE == codes['WORK_DIR_BUSY_EXIT_CODE']
    assert preemption.PREEMPTED_EXIT_CODE == codes['PREEMPTED_EXIT_CODE'] == 128 + 15
