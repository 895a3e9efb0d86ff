"""tools/gpu_proof.sh's kill step on CPU: a real kill-and-resume run, tiny, its result and the
table (the fast checks of the script are in tests/harness/test_gpu_proof.py)."""
import json
import os
import subprocess
import sys

from tests.conftest import ROOT

TINY_KILL = ('--fake-images 32 --kill-at 5 --iter-interval 2 --cfg-options '
             'train_dataloader.dataset.input_size=32 train_dataloader.batch_size=4 '
             'train_dataloader.num_workers=1 model.queue_size=16')


def test_kill_step_writes_its_result_and_the_table(tmp_path, subprocess_env):
    out, scratch = tmp_path / 'out', tmp_path / 'tmp'
    scratch.mkdir()
    env = dict(subprocess_env, STEPS='kill', KILL_ARGS=TINY_KILL, PYTHON=sys.executable,
               WHEELS=str(tmp_path / 'no-wheels'), TMPDIR=str(scratch))
    proc = subprocess.run(['bash', str(ROOT / 'tools' / 'gpu_proof.sh'), str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / 'kill_resume.json').read_text())
    assert result['passed'] and result['comparison']['identical']
    lines = proc.stdout.splitlines()
    assert any(line.strip().startswith('kill_resume  pass in') for line in lines)
    assert lines[-1].startswith('kill-resume: passed')
    assert sorted(os.listdir(out)) == ['kill_resume.json', 'kill_resume.log']
    assert not list(scratch.glob('gpu-proof.*'))  # the scratch folder is removed
