"""From a config file to a checked config: overrides, work dir, resume choice, bad files in one
line (syntax errors with file and line, old module paths naming benchmark.components); a run
prepared module by module, each once."""
import os
import sys

import pytest
import torch

from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import read_config
from benchmark.engine.launch import load_config
from benchmark.layout import REPO_ROOT

CONFIG = str(REPO_ROOT / 'configs' / 'mocov2_r18_digits.py')


def test_overrides_work_dir_and_launcher():
    cfg = load_config(CONFIG, {'train_cfg.max_epochs': 2}, launcher='pytorch')
    assert cfg.train_cfg.max_epochs == 2 and cfg.launcher == 'pytorch'
    assert cfg.work_dir == os.path.join('work_dirs', 'mocov2_r18_digits')
    assert load_config(CONFIG, work_dir='runs/w').work_dir == 'runs/w'


def test_resume_auto_without_checkpoints_starts_from_scratch(tmp_path, capsys):
    cfg = load_config(CONFIG, work_dir=str(tmp_path), resume='auto')
    assert (cfg.resume, cfg.load_from) == (False, None)
    assert 'starting from scratch' in capsys.readouterr().err


def test_resume_from_an_unloadable_file_is_one_line(tmp_path):
    bad = tmp_path / 'epoch_1.pth'
    bad.write_bytes(b'not a checkpoint')
    with pytest.raises(ValueError, match=r'^--resume .*epoch_1.pth: cannot load it') as info:
        load_config(CONFIG, work_dir=str(tmp_path), resume=str(bad))
    assert '\n' not in str(info.value)


def test_resume_from_a_named_checkpoint(tmp_path):
    path = tmp_path / 'epoch_1.pth'
    torch.save({'state_dict': {}, 'meta': {'epoch': 1}}, path)
    cfg = load_config(CONFIG, work_dir=str(tmp_path), resume=str(path))
    assert (cfg.resume, cfg.load_from) == (True, str(path))


def test_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / 'broken.py'
    path.write_text("_base_ = []\nmodel = dict(type='MoCo'\ntrain_cfg = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    message = str(info.value)
    assert '\n' not in message and str(path) in message and 'line 2' in message
    assert 'syntax error' in message


def test_missing_config_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match='not found; see configs/'):
        read_config(str(tmp_path / 'nope.py'))


@pytest.mark.parametrize('old', ['benchmark.datasets', 'benchmark.hooks', 'methods.linear_probe'])
def test_old_module_path_in_custom_imports_names_components(tmp_path, old):
    path = tmp_path / 'old.py'
    path.write_text(f"_base_ = [{CONFIG!r}]\n"
                    f"custom_imports = dict(imports=['methods', {old!r}], "
                    "allow_failed_imports=False)\n")
    with pytest.raises(ConfigError) as info:
        read_config(str(path))
    message = str(info.value)
    assert '\n' not in message and old in message and 'benchmark.components' in message


def test_a_prepared_run_holds_its_checked_config_identity_views_and_work_dir(tmp_path):
    """tools/train.py's arguments to a PreparedRun; --check-only stops once the config is
    checked and the work dir found free, holding nothing."""
    from argparse import Namespace

    from benchmark.engine.launch import prepare_run
    from benchmark.engine.work_dir_lock import TRAINER_LOCK, release_work_dir
    args = Namespace(config=CONFIG, cfg_options={'train_cfg.max_epochs': 1}, launcher='none',
                     work_dir=str(tmp_path / 'w'), resume='auto', check_only=True)
    assert prepare_run(args, 0.0) is None and not (tmp_path / 'w').exists()
    steps = []  # the modules launch's code calls into, in order (each step's owner)

    def note(frame, event, _):
        callee, caller = frame.f_globals.get('__name__', ''), frame.f_back.f_globals.get('__name__')
        ours = callee.split('.')[0] in ('benchmark', 'methods') and callee != caller
        if event == 'call' and caller == 'benchmark.engine.launch' and ours and (
                not steps or steps[-1] != callee):
            steps.append(callee)
    sys.setprofile(note)
    try:
        run = prepare_run(Namespace(**{**vars(args), 'check_only': False}), 0.0)
    finally:
        sys.setprofile(None)
    try:
        assert len(steps) == len(set(steps)), steps  # each module once: no step comes back
        assert steps[:3] == ['benchmark.engine.config_file', 'benchmark.engine.train_views',
                             'benchmark.engine.config.check'], steps
        assert run.cfg.train_cfg.max_epochs == 1 and run.work_dir == str(tmp_path / 'w')
        assert type(run.cfg).__name__ == 'FormattedConfig'  # its text formatted once a statement
        assert set(run.identity) == {'config_text', 'setting'} and run.resume is None
        assert run.views == 'device'  # the digits configs draw their views on the device
        assert (tmp_path / 'w' / TRAINER_LOCK).exists()  # held by this process
    finally:
        release_work_dir(run.work_dir)
