"""benchmark.harness.faults.kill_resume and tools/kill_resume.py: a real SIGKILL and resume through
tools/dist_train.sh (gloo here; NCCL on a GPU), compared with the uninterrupted run."""
import json
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from benchmark.harness.faults.kill_resume import compare, killed_by_sigkill, overlay_config
from tests.conftest import ROOT

TINY = ['train_dataloader.dataset.input_size=32', 'train_dataloader.batch_size=4',
        'train_dataloader.num_workers=1', 'model.queue_size=16']


def test_overlay_config_sets_data_length_checkpoints_and_the_kill(tmp_path):
    path = overlay_config(str(tmp_path / 'k.py'), str(ROOT / 'configs' / 'mixco_r18_tiny_fast.py'),
                          data_root='/data/tiny', epochs=3, iter_interval=7,
                          options={'model.queue_size': 16}, kill_at=11)
    cfg = Config.fromfile(path)
    assert cfg.train_dataloader.dataset.data_root == '/data/tiny'
    assert (cfg.train_cfg.max_epochs, cfg.default_hooks.checkpoint.iter_interval) == (3, 7)
    assert cfg.model.queue_size == 16 and cfg.model.type == 'MixCoMoCo'
    assert 'benchmark.harness.faults.hooks' in cfg.custom_imports.imports
    types = [h['type'] for h in cfg.custom_hooks]
    assert types[-1] == 'KillHook' and cfg.custom_hooks[-1]['at_iter'] == 11
    assert 'ChannelsLastHook' in types  # the config's own hooks stay
    plain = Config.fromfile(overlay_config(str(tmp_path / 'p.py'), path, data_root=None,
                                           epochs=3, iter_interval=7))
    assert plain.train_dataloader.dataset.data_root == '/data/tiny'


def test_compare_reports_identity_and_the_largest_difference():
    a = dict(w=torch.ones(3), n=torch.tensor(2))
    assert compare(a, dict(a)) == dict(identical=True, tensors_differing=0, tensors=2,
                                       max_abs_diff=0.0)
    out = compare(a, dict(w=torch.tensor([1.0, 1.5, 0.0]), n=torch.tensor(2)))
    assert (out['identical'], out['tensors_differing'], out['max_abs_diff']) == (False, 1, 1.0)


def test_a_kill_is_told_from_a_crash():
    def proc(rc, out=''):
        return subprocess.CompletedProcess([], rc, stdout=out, stderr='')
    assert killed_by_sigkill(proc(-9))  # one process
    torchrun = '  exitcode  : -9 (pid: 2440)  (SIGKILL)\n  traceback : Signal 9 (SIGKILL) received'
    assert killed_by_sigkill(proc(1, torchrun))
    assert not killed_by_sigkill(proc(1, 'RuntimeError: CUDA out of memory\n  exitcode  : 1'))


def tool(args, env, timeout=900):
    return subprocess.run([sys.executable, str(ROOT / 'tools' / 'kill_resume.py'), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize('args, needle', [
    (['configs/mixco_r18_tiny_fast.py', '--kill-at', '0'], '--kill-at'),
    (['configs/nope.py', '--kill-at', '3'], 'nope.py'),
    (['configs/mixco_r18_tiny_fast.py', '--kill-at', '3', '--cfg-options', 'model.queue_size=-1'],
     'queue_size'),
    (['configs/mixco_r18_tiny_fast.py', '--kill-at', '3', '--data-root', '/no/such/dir'],
     '/no/such/dir'),
    (['configs/mixco_r18_tiny_fast.py', '--kill-at', '3', '--work-dir', str(ROOT / 'configs')],
     'is not empty')])
def test_bad_input_is_one_line_and_exit_2(subprocess_env, args, needle):
    proc = tool(args, subprocess_env, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.slow
def test_fast_config_killed_and_resumed_under_torchrun_is_bit_identical(tmp_path,
                                                                       subprocess_env):
    """The paper's fast config (device views, bf16, channels_last) in one torchrun process (DDP
    over gloo, as NCCL on one GPU): killed after iteration 5, resumed from iter_4.pth, equal to
    the uninterrupted run bit for bit. Before ChannelsLastDistributedDataParallel, 209 of 250
    tensors differed here."""
    out = tmp_path / 'result.json'
    proc = tool(['configs/mixco_r18_tiny_fast.py', '--nproc', '1', '--kill-at', '5',
                 '--iter-interval', '2', '--fake-images', '32', '--work-dir', str(tmp_path / 'w'),
                 '--out', str(out), '--cfg-options', *TINY], subprocess_env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result['passed'] and result['failures'] == [] and result['backend'] == 'gloo'
    assert result['killed_rc'] != 0 and result['resumed_rc'] == 0 == result['reference_rc']
    assert result['resumed_from_iter'] == 4 == result['newest_checkpoint_iter']
    assert result['final_iter'] == 16 == result['reference_iter']
    assert 'noise_floor' not in result  # identity is required on CPU: no second reference
    assert result['comparison']['identical'] and result['corrupt_checkpoints'] == []
    assert 'kill-resume: passed' in proc.stdout
    assert not list((tmp_path / 'w').glob('**/*.pth'))  # compared, then removed


@pytest.mark.slow
def test_report_only_mode_measures_the_noise_floor(tmp_path, fake_tiny):
    """The GPU mode (identity reported, not required) on CPU: a second uninterrupted run gives
    the noise floor, which is zero here, and the run passes on its iterations alone."""
    from benchmark.harness.faults.kill_resume import kill_and_resume
    options = dict(item.split('=') for item in TINY)
    options = {k: int(v) for k, v in options.items()}
    result = kill_and_resume(str(ROOT / 'configs' / 'mocov2_r18_tiny.py'), str(tmp_path),
                             data_root=fake_tiny, kill_at=5, iter_interval=3, options=options,
                             require_identical=False, log=lambda msg: None)
    assert result['passed'], result['failures']
    assert (result['newest_checkpoint_iter'], result['resumed_from_iter']) == (3, 3)
    assert result['noise_floor'] == dict(identical=True, tensors_differing=0,
                                         tensors=result['noise_floor']['tensors'], max_abs_diff=0.0)
    assert result['comparison']['identical']  # CPU: identical although not required
