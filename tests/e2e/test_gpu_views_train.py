"""A real run with the views drawn by GPUViewPreprocessor (on the CPU here). Killed and resumed
with device views: tests/harness/faults/test_resume_in_process.py (in-process) and
tests/e2e/test_faults.py (two processes, the fast config)."""
import subprocess
import sys

from tests.conftest import ROOT

DIGITS_DEVICE_VIEWS = [
    'train_dataloader.dataset.view=raw_uint8',
    'model.data_preprocessor.type=GPUViewPreprocessor',
    'model.data_preprocessor.view.name=mocov2',  # the digits config's view, moved to the device
    'model.data_preprocessor.view.min_scale=0.6',
    'model.data_preprocessor.view.gaussian_blur=0.0',
    'model.data_preprocessor.view.random_gray_scale=0.0',
    'model.data_preprocessor.view.hf_prob=0.0',
]


def test_digits_demo_trains_with_device_views(tmp_path, subprocess_env):
    """Three steps of the digits demo config with its views moved to the device: the run saves
    its epoch, and the config it ran filled the preprocessor's size from the dataset's."""
    work = tmp_path / 'run'
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools' / 'train.py'), 'configs/mocov2_r18_digits.py',
         '--work-dir', str(work), '--no-eval', '--cfg-options', 'train_cfg.max_epochs=1',
         'train_dataloader.num_batch_per_epoch=3', *DIGITS_DEVICE_VIEWS],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (work / 'epoch_1.pth').is_file()
    config = next(work.glob('*/vis_data/config.py')).read_text()
    assert "type='GPUViewPreprocessor'" in config and 'input_size=16' in config
