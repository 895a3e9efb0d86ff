"""benchmark.harness.faults.kill_resume and tools/kill_resume.py: the config it writes, how a kill
is told from a crash, the comparison with the uninterrupted run (required identity, or the noise
floor on a GPU), and its bad input. tests/e2e/test_faults.py runs it for real on two
processes."""
import subprocess
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from benchmark.harness.faults.kill_resume import (against_reference, compare, killed_by_sigkill,
                                                  overlay_config)
from tests.conftest import ROOT
from tools import kill_resume


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


@pytest.mark.parametrize('args, needle', [
    (['configs/mixco_r18_tiny_fast.py', '--kill-at', '0'], '--kill-at'),
    (['configs/nope.py', '--kill-at', '3'], 'nope.py'),
    (['configs/mixco_r18_tiny_fast.py', '--kill-at', '3', '--cfg-options', 'model.queue_size=-1'],
     'queue_size'),
    (['configs/mixco_r18_tiny_fast.py', '--kill-at', '3', '--data-root', '/no/such/dir'],
     '/no/such/dir'),
    (['configs/mixco_r18_tiny_fast.py', '--kill-at', '3', '--work-dir', str(ROOT / 'configs')],
     'is not empty')])
def test_bad_input_is_one_line_and_exit_2(args, needle, run_main):
    """tools/kill_resume.py's main, in-process; tests/e2e/test_tool_inputs.py runs the tool once
    as a process."""
    code, _, err, _ = run_main(kill_resume, *args)
    assert code == 2, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error:') and needle in lines[0], err


def _reference_check(require_identical, noise_floor, resumed, *uninterrupted):
    """against_reference on model states: the runs it asks for are handed out in order."""
    runs = iter(uninterrupted)
    asked = []

    def run(name):
        asked.append(name)
        return next(runs)
    out = dict(failures=[], final_iter=16, reference_iter=16)
    against_reference(out, resumed, run, require_identical, noise_floor)
    return out, asked


def test_identity_required_fails_on_any_difference_and_trains_no_second_reference():
    same, other = dict(w=torch.ones(2)), dict(w=torch.tensor([1.0, 1.25]))
    out, asked = _reference_check(True, False, same, dict(w=torch.ones(2)))
    assert asked == ['reference'] and out['failures'] == [] and 'noise_floor' not in out
    assert out['comparison'] == dict(identical=True, tensors_differing=0, tensors=1,
                                     max_abs_diff=0.0)
    out, _ = _reference_check(True, False, other, same)
    assert out['failures'] == ['1 tensors differ from the uninterrupted run']
    assert out['comparison']['max_abs_diff'] == 0.25


def test_report_only_mode_measures_the_noise_floor():
    """The GPU mode: identity reported, not required; a second uninterrupted run gives the
    noise floor; a resumed run that ends at another iteration still fails."""
    resumed, ref, ref2 = (dict(w=torch.tensor([1.0, v])) for v in (1.5, 1.0, 1.125))
    out, asked = _reference_check(False, True, resumed, ref, ref2)
    assert asked == ['reference', 'reference2'] and out['failures'] == []
    assert (out['comparison']['identical'], out['comparison']['max_abs_diff']) == (False, 0.5)
    assert out['noise_floor'] == dict(identical=False, tensors_differing=1, tensors=1,
                                      max_abs_diff=0.125)
    out = dict(failures=[], final_iter=12, reference_iter=16)
    against_reference(out, ref, lambda name: ref, False, False)
    assert out['failures'] == ['resumed run ended at iteration 12, the uninterrupted one at 16']
    out = dict(failures=[], final_iter=16, reference_iter=16)
    against_reference(out, ref, lambda name: None, True, True)  # the reference did not finish
    assert out == dict(failures=[], final_iter=16, reference_iter=16)


@pytest.mark.parametrize('concurrent', [False, True])
def test_concurrent_references_train_beside_the_killed_run(tmp_path, monkeypatch, concurrent):
    """With ``concurrent`` the two uninterrupted runs start before the killed run ends (a GPU
    check then takes one run's time); either way the same runs, the same result."""
    import threading
    import time

    from benchmark.harness.faults import kill_resume as kr
    events, lock = [], threading.Lock()

    ports = set()

    def train(cfg, folder, *, nproc, resume, torchrun, timeout, env):
        name = Path(folder).name if not resume else 'resumed'
        name = 'killed' if cfg.endswith('killed.py') else name
        with lock:
            events.append(('start', name))
            ports.add(env.get('PORT'))
        time.sleep(0.2)
        with lock:
            events.append(('end', name))
        if name == 'killed':
            return subprocess.CompletedProcess([], -9, 'exitcode  : -9', '')
        return subprocess.CompletedProcess([], 0, 'resumed epoch: 1, iter: 4' * resume, '')
    monkeypatch.setattr(kr, 'train', train)
    monkeypatch.setenv('PORT', '29511')  # a fixed port would be taken by the first run
    run_states = iter([4, 16])  # the run's folder after the kill, then after the resume
    monkeypatch.setattr(kr, 'final_state', lambda folder: (
        next(run_states) if Path(folder).name == 'run' else 16, dict(w=torch.ones(2))))
    monkeypatch.setattr(kr, 'referenced_corrupt', lambda folder: [])
    out = kr.kill_and_resume(str(ROOT / 'configs' / 'mixco_r18_tiny_fast.py'), str(tmp_path),
                             kill_at=5, iter_interval=2, require_identical=False,
                             noise_floor=True, concurrent=concurrent, log=lambda line: None)
    assert out['passed'], out['failures']
    assert out['noise_floor']['identical'] and out['comparison']['identical']
    assert 'weights' not in out and {'reference_rc', 'reference2_rc'} <= set(out)
    killed_end = events.index(('end', 'killed'))
    early = {name for what, name in events[:killed_end] if what == 'start'}
    assert early == ({'killed', 'reference', 'reference2'} if concurrent else {'killed'})
    assert ports == ({None} if concurrent else {'29511'})


def test_a_reference_that_left_no_weights_is_a_failure_not_a_crash(tmp_path, monkeypatch):
    from benchmark.harness.faults import kill_resume as kr

    def train(cfg, folder, *, nproc, resume, torchrun, timeout, env):
        if cfg.endswith('killed.py'):
            return subprocess.CompletedProcess([], -9, 'exitcode  : -9', '')
        return subprocess.CompletedProcess([], 0, 'resumed epoch: 1, iter: 4' * resume, '')

    def final_state(folder):
        if Path(folder).name == 'reference2':
            raise FileNotFoundError(f'{folder}/epoch_2.pth: no such file')
        return 4, dict(w=torch.ones(2))
    monkeypatch.setattr(kr, 'train', train)
    monkeypatch.setattr(kr, 'final_state', final_state)
    monkeypatch.setattr(kr, 'referenced_corrupt', lambda folder: [])
    out = kr.kill_and_resume(str(ROOT / 'configs' / 'mixco_r18_tiny_fast.py'), str(tmp_path),
                             kill_at=5, iter_interval=2, require_identical=False,
                             noise_floor=True, concurrent=True, log=lambda line: None)
    assert not out['passed'] and 'noise_floor' not in out
    assert out['failures'] == [f'the uninterrupted run reference2: {tmp_path}/reference2/'
                               f'epoch_2.pth: no such file']
