"""tools/gpu_proof.sh on CPU: its steps, outputs and failure accounting (the GPU run is the
device tool's; here the env step fails for want of CUDA, which the table must say)."""
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

TINY_KILL = ('--fake-images 32 --kill-at 5 --iter-interval 2 --cfg-options '
             'train_dataloader.dataset.input_size=32 train_dataloader.batch_size=4 '
             'train_dataloader.num_workers=1 model.queue_size=16')


def proof(tmp_path, env, steps, **extra):
    env = dict(env, OUT=str(tmp_path / 'out'), STEPS=steps, PYTHON=sys.executable,
               WHEELS=str(tmp_path / 'no-wheels'), **extra)
    return subprocess.run(['bash', str(ROOT / 'tools' / 'gpu_proof.sh')], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def test_unknown_step_is_exit_2(tmp_path, subprocess_env):
    proc = proof(tmp_path, subprocess_env, 'env bogus')
    assert proc.returncode == 2 and "unknown step 'bogus'" in proc.stderr


@pytest.mark.skipif(__import__('torch').cuda.is_available(), reason='checks the CPU outcome')
def test_env_step_reports_versions_and_fails_without_cuda(tmp_path, subprocess_env):
    proc = proof(tmp_path, subprocess_env, 'env')
    assert proc.returncode == 1, proc.stdout + proc.stderr
    log = (tmp_path / 'out' / 'env.log').read_text()
    assert '| mmengine 0.10.7 |' in log and 'no CUDA device' in log
    assert 'env          FAIL (rc 1)' in proc.stdout


@pytest.mark.slow
def test_kill_step_writes_its_result_and_the_table(tmp_path, subprocess_env):
    proc = proof(tmp_path, subprocess_env, 'kill', KILL_ARGS=TINY_KILL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / 'out' / 'kill_resume.json').read_text())
    assert result['passed'] and result['comparison']['identical']
    lines = proc.stdout.splitlines()
    assert any(line.strip().startswith('kill_resume  pass in') for line in lines)
    assert lines[-1].startswith('kill-resume: passed')
    assert sorted(os.listdir(tmp_path / 'out')) == ['kill_resume.json', 'kill_resume.log']
