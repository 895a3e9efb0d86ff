"""tools/dist_train.sh with two processes ends as tools/train.py does: bad data is one line and
exit 2 before torchrun starts; an error a training process ends with is its line, last on
stderr, with its code, torchrun's report in <work dir>/torchrun.log and not on the terminal.

The other classes through the script reuse launches other tests make: a process that dies
without a line (SIGKILL) is the fault campaign's dead process (tests/e2e/test_faults.py), a
full disk (74, its line last) tests/e2e/test_full_disk_run.py, a pre-emption (143)
tests/e2e/test_cluster_signals.py, a busy work dir (75) tests/engine/test_work_dir_lock.py; a
divergence's line and code 3 in-process (tests/tools/test_train_errors.py,
tests/harness/faults/test_resume_in_process.py), the rest unit by unit in
tests/engine/test_torchrun_job.py."""
import subprocess
import sys

import torch

from benchmark.data.fakes import image_files_under, make_fake_tiny_imagenet, truncate_image_file
from tests.conftest import ROOT

DIGITS = 'configs/mocov2_r18_digits.py'


def dist_train(config, *args, env) -> subprocess.CompletedProcess:
    return subprocess.run(['bash', 'tools/dist_train.sh', config, '2', *map(str, args)], cwd=ROOT,
                          env=dict(env, PYTHON=sys.executable), capture_output=True, text=True,
                          timeout=300)


def test_bad_image_files_are_one_line_and_exit_2_before_torchrun_starts(tmp_path,
                                                                          subprocess_env):
    """The headline command on a data folder with 4 truncated files and one that is no image:
    the line tools/train.py says, alone, and no training process started (none made the work
    dir)."""
    data = make_fake_tiny_imagenet(tmp_path, num_classes=2, train_per_class=4, val_per_class=1,
                                   size=16)
    files = sorted(f for f in image_files_under(data) if '/train/' in f)
    for path in files[:4]:
        truncate_image_file(path)
    with open(files[4], 'w') as handle:
        handle.write('<html>not found</html>')
    proc = dist_train('configs/mixco_r18_tiny.py', '--work-dir', tmp_path / 'work',
                      '--cfg-options', f'train_dataloader.dataset.data_root={data}',
                      env=subprocess_env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f'error: configs/mixco_r18_tiny.py: {data}: 5 bad image files (4 truncated, 1 '
        'non-image), e.g. train/n00000000/images/n00000000_0.JPEG, train/n00000000/images/'
        'n00000000_1.JPEG; fix or remove them, or set train_dataloader.dataset.bad_data=skip']
    assert not (tmp_path / 'work').exists()


def test_an_error_a_training_process_ends_with_is_the_last_line_with_its_code(tmp_path,
                                                                              subprocess_env):
    """--resume with a checkpoint of another model, which only a training process finds (each
    builds the model): its line last, exit 2, torchrun's report in the run's log, named in the
    line before it, and no process's traceback."""
    from methods import MoCo
    other, work = tmp_path / 'other.pth', tmp_path / 'work'
    torch.save({'state_dict': MoCo(backbone=dict(depth=18), queue_size=64).state_dict(),
                'meta': {'epoch': 1}}, other)
    proc = dist_train(DIGITS, '--work-dir', work, '--resume', other, '--cfg-options',
                      'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
                      env=subprocess_env)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert lines[-1].startswith(f'error: {DIGITS}: checkpoint {other}: checkpoint does not fit '
                                'the model: '), lines[-3:]
    log = work / 'torchrun.log'
    assert lines[-2] == f"torchrun's report: {log} (how each process ended)"
    assert 'ChildFailedError' not in proc.stderr and 'Root Cause' not in proc.stderr
    assert 'Traceback' not in proc.stderr
    report = log.read_text()
    assert 'Root Cause (first observed failure)' in report and report.endswith(lines[-1] + '\n')
