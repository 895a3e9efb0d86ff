"""The fault campaign's helpers: the tiny configs it writes pass the real config check."""
import os
import socket

import pytest
import torch
from mmengine.config import Config

from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import read_config
from benchmark.harness.faults import runs as fault_runs
from benchmark.layout import REPO_ROOT
from benchmark.names import METHOD_NAMES
from benchmark.harness.faults.runs import (BASE_HOOKS, IMPORTS, Scorecard, differing,
                                          final_checkpoint, free_port, referenced_corrupt,
                                          remove_checkpoints, tiny_env, write_config)


@pytest.mark.parametrize('method', ['mocov2', 'mixco', 'simclr', 'mixco_simclr'])
def test_written_config_reads_and_validates(tmp_path, method):
    path = write_config(str(tmp_path / f'{method}.py'), method, '/data/fake-tiny', epochs=3,
                        batch=6, iter_interval=5, max_keep_ckpts=2, workers=0,
                        fault="dict(type='KillHook', at_iter=5)", dataset="bad_data='skip'",
                        extra='randomness = dict(seed=7)\n')
    cfg = read_config(path)
    validate_config(cfg)
    loader = cfg.train_dataloader
    assert (loader.batch_size, loader.num_workers) == (6, 0)
    assert (loader.dataset.data_root, loader.dataset.input_size, loader.dataset.bad_data) == (
        '/data/fake-tiny', 32, 'skip')
    assert cfg.train_cfg.max_epochs == 3 and cfg.randomness.seed == 7
    assert cfg.default_hooks.checkpoint.iter_interval == 5
    assert cfg.default_hooks.checkpoint.max_keep_ckpts == 2
    assert cfg.custom_imports.imports == IMPORTS
    assert [h['type'] for h in cfg.custom_hooks] == ['RunInfoHook', 'KNNMonitorHook',
                                                     'NaNGuardHook', 'PreemptionHook', 'KillHook']
    assert cfg.custom_hooks[-1]['at_iter'] == 5
    if 'simclr' in method:
        assert 'queue_size' not in cfg.model
    else:
        assert cfg.model.queue_size == 16
    assert METHOD_NAMES[cfg.model.type] == method


def test_a_misspelt_fault_hook_fails_the_check(tmp_path):
    path = write_config(str(tmp_path / 'bad.py'), 'mocov2', '/d', fault="dict(type='KilHook')")
    with pytest.raises(ConfigError, match=r"^custom_hooks\.4\.type: unknown hook 'KilHook' "
                                          r"\(did you mean 'KillHook'\?\)$"):
        validate_config(read_config(path))


def test_base_hooks_are_the_runtime_defaults():
    runtime = Config.fromfile(str(REPO_ROOT / 'configs/_base_/runtime/default.py'))
    assert eval(f'[{BASE_HOOKS}]') == runtime.custom_hooks  # noqa: S307 - our own constant


def test_differing_names_changed_and_one_sided_tensors():
    a = dict(w=torch.ones(2), b=torch.zeros(1), only_a=torch.ones(1))
    b = dict(w=torch.ones(2).clone(), b=torch.tensor([1e-12]), only_b=torch.ones(1))
    assert differing(a, b) == ['b', 'only_a', 'only_b']
    assert differing(a, dict(a)) == []


def test_free_port_is_bindable():
    port = free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', port))


def test_tiny_env(monkeypatch):
    monkeypatch.setenv('WANDB_API_KEY', 'secret')
    monkeypatch.delenv('PYTHONPATH', raising=False)
    env = tiny_env('fake-home')
    assert (env['PYTHONPATH'], env['OMP_NUM_THREADS'], env['WANDB_MODE'], env['HOME']) == (
        str(REPO_ROOT), '1', 'disabled', 'fake-home')
    assert 'WANDB_API_KEY' not in env


def test_tiny_env_keeps_carried_packages_importable(monkeypatch):
    """On a GPU machine the wheels are installed with `pip --target DIR` and found through
    PYTHONPATH: a subprocess must keep it, after the checkout."""
    monkeypatch.setenv('PYTHONPATH', 'carried-site')
    assert tiny_env()['PYTHONPATH'] == os.pathsep.join([str(REPO_ROOT), 'carried-site'])


def test_checkpoint_files(tmp_path):
    assert final_checkpoint('w', 2) == os.path.join('w', 'epoch_2.pth')
    good = tmp_path / 'epoch_1.pth'
    torch.save(dict(state_dict={'w': torch.ones(1)}, meta={}), good)
    (tmp_path / 'epoch_2.pth').write_bytes(b'garbage')
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'epoch_3.pth'))
    bad = referenced_corrupt(str(tmp_path))
    assert bad == [f'{tmp_path / "epoch_3.pth"} (last_checkpoint points to a missing file)',
                   str(tmp_path / 'epoch_2.pth')]
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / 'iter_4.pth').write_bytes(b'')
    (tmp_path / 'sub' / '.epoch_5.pth.tmp').write_bytes(b'')
    remove_checkpoints(str(tmp_path))
    assert sorted(p.name for p in tmp_path.rglob('*') if p.is_file()) == ['last_checkpoint']


def test_scorecard_counts_and_lists_failures():
    card = Scorecard()
    card.fault(True, 'kill at 3')
    card.fault(False, 'kill during save')
    card.bad_input(True, 'truncated jpeg')
    card.bad_input(False, 'empty class')
    assert (card.faults_injected, card.faults_survived) == (2, 1)
    assert (card.bad_inputs_tried, card.bad_inputs_rejected) == (2, 1)
    assert card.failures == ['kill during save', 'empty class']
    assert card.lines()[0] == 'faults injected / survived:     2 / 1'
    assert card.lines()[2] == 'bad inputs tried / rejected:    2 / 1'
