"""Real runs with the views drawn by GPUViewPreprocessor (on the CPU here): train, kill, resume."""
import os
import subprocess
import sys

import pytest

from benchmark.harness.faults import runs as fr
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
# fault_runs.write_config's tiny config over configs/<method>_r18_tiny.py, with device views.
DEVICE_VIEWS_EXTRA = (
    f"custom_imports = dict(imports={fr.IMPORTS + ['benchmark.data.gpu_views']!r}, "
    "allow_failed_imports=False)\n"
    "model = dict(queue_size=16, data_preprocessor=dict(type='GPUViewPreprocessor', "
    "view='mocov2'))\n")


@pytest.mark.slow
def test_digits_demo_trains_with_device_views(tmp_path, subprocess_env):
    work = tmp_path / 'run'
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools' / 'train.py'), 'configs/mocov2_r18_digits.py',
         '--work-dir', str(work), '--no-eval', '--cfg-options', 'train_cfg.max_epochs=1',
         *DIGITS_DEVICE_VIEWS],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (work / 'epoch_1.pth').is_file()
    config = next(work.glob('*/vis_data/config.py')).read_text()
    assert "type='GPUViewPreprocessor'" in config and 'input_size=16' in config


@pytest.mark.slow
def test_sigkill_then_resume_with_device_views_is_bit_identical(tmp_path, fake_tiny):
    def config(name, fault=''):
        return fr.write_config(str(tmp_path / f'{name}.py'), 'mixco', fake_tiny, epochs=2,
                               fault=fault, dataset="view='raw_uint8'", extra=DEVICE_VIEWS_EXTRA)

    reference, work = str(tmp_path / 'reference'), str(tmp_path / 'killed')
    ref = fr.train(config('reference'), reference)
    assert ref.returncode == 0, ref.stderr[-2000:]
    killed = fr.train(config('kill', "dict(type='KillHook', at_iter=5)"), work)
    assert killed.returncode != 0  # killed after iteration 5; iter_3.pth is the newest save
    resumed = fr.train(config('resume'), work, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert 'GPUViewPreprocessor' in open(os.path.join(reference, 'reference.py')).read()
    weights = fr.load_weights(fr.final_checkpoint(reference, 2))
    assert not fr.differing(weights, fr.load_weights(fr.final_checkpoint(work, 2)))
