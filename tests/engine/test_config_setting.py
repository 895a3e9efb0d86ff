"""What a run measures, apart from its seed: `config_setting`'s text is one across seeds, work
dirs, launchers and data roots and changes with a real change; its overrides are exactly the
options that change a value of the shipped file (through `_base_` chains, without the preprocessor
size `fill_view_size` derives); tools/eval.py records both."""
import hashlib
import json
import re

import pytest

import benchmark.components  # noqa: F401  registers every type a config can name
from benchmark.engine.config_file import merge_options, read_config
from benchmark.engine.config_text import config_identity, config_setting
from benchmark.engine.launch import load_config
from benchmark.layout import REPO_ROOT
from benchmark.reports.records import setting_sha256
from tools import eval as eval_tool

MIXCO = 'configs/mixco_r18_digits.py'
MIXCO_PATH = str(REPO_ROOT / MIXCO)
GPU_VIEWS = str(REPO_ROOT / 'configs' / 'mocov2_r18_tiny_fast.py')  # preprocessor size filled


def setting(options=None, config=MIXCO_PATH, **placement):
    return config_setting(load_config(config, options, **placement))


def test_the_shipped_config_has_no_overrides_and_keeps_no_placement_seed_or_data_root():
    cfg = load_config(MIXCO_PATH, {'randomness.seed': 3}, work_dir='somewhere/w')
    out = config_setting(cfg)
    assert out['overrides'] == {}
    assert config_setting(cfg, MIXCO_PATH) == out  # cfg.filename is the default file
    assert "mix_temperature=0.2" in out['text'] and "type='MixCoMoCo'" in out['text']
    for word in ('work_dir', 'launcher', 'resume', 'load_from', 'data_root'):
        assert word not in out['text'], word
    assert not re.search(r'\bseed=', out['text'])  # randomness keeps diff_rank_seed


@pytest.mark.parametrize('options, expected', [
    ({'model.mix_temperature': 0.1}, {'model.mix_temperature': 0.1}),
    ({'model.mix_temperature': 0.2}, {}),  # the shipped value: no override
    ({'model.mix_alpha': 0.3}, {'model.mix_alpha': 0.3}),  # a key the file does not set
    ({'model.mix_temperature': 0.1, 'model.mix_weight': 1.0, 'train_cfg.max_epochs': 5},
     {'model.mix_temperature': 0.1, 'train_cfg.max_epochs': 5}),
    ({'train_dataloader.dataset.view': 'simclr'},  # a value for a dict: one override
     {'train_dataloader.dataset.view': 'simclr'}),
    ({'randomness.seed': 7, 'work_dir': 'w', 'launcher': 'pytorch', 'resume': True,
      'load_from': 'x.pth', 'train_dataloader.dataset.data_root': '/data/digits',
      'val_dataloader.dataset.data_root': '/data/val'}, {}),
])
def test_overrides_are_the_options_that_change_a_value(options, expected):
    assert setting(options)['overrides'] == expected


def test_text_is_one_across_seeds_work_dirs_launchers_and_data_roots(tmp_path):
    base = setting()['text']
    assert setting({'randomness.seed': 5}, work_dir=str(tmp_path / 'a'))['text'] == base
    assert setting({'train_dataloader.dataset.data_root': str(tmp_path)},
                   launcher='pytorch')['text'] == base
    cfg = load_config(MIXCO_PATH, {'randomness.seed': 1})
    cfg.resume, cfg.load_from = True, str(tmp_path / 'epoch_3.pth')
    assert config_setting(cfg)['text'] == base
    # ... while the config's identity tells the seeds apart
    assert (config_identity(load_config(MIXCO_PATH, {'randomness.seed': 5}))
            != config_identity(load_config(MIXCO_PATH, {'randomness.seed': 6})))
    changed = setting({'model.mix_temperature': 0.1})['text']
    assert changed != base and 'mix_temperature=0.1' in changed
    assert setting({'model.mix_temperature': 0.2})['text'] == base


def test_keys_set_along_the_base_chain(tmp_path):
    """mixco_r18_digits.py <- mocov2_r18_digits.py <- _base_/schedules: a key any of them sets
    is an override only where the option changes its value."""
    assert setting({'model.queue_size': 1024})['overrides'] == {}  # from mocov2_r18_digits.py
    assert setting({'model.queue_size': 512})['overrides'] == {'model.queue_size': 512}
    assert setting({'optim_wrapper.optimizer.momentum': 0.9})['overrides'] == {}  # schedules
    assert (setting({'optim_wrapper.optimizer.momentum': 0.8})['overrides']
            == {'optim_wrapper.optimizer.momentum': 0.8})
    # A config of our own on top of the shipped one: no overrides against itself, its own
    # values against the file it builds on.
    child = tmp_path / 'mixco_sharp.py'
    child.write_text(f"_base_ = [{MIXCO_PATH!r}]\nmodel = dict(mix_temperature=0.05)\n")
    cfg = load_config(str(child), {'model.mix_weight': 2.0})
    assert config_setting(cfg)['overrides'] == {'model.mix_weight': 2.0}
    assert config_setting(cfg, MIXCO_PATH)['overrides'] == {'model.mix_temperature': 0.05,
                                                           'model.mix_weight': 2.0}
    assert (config_setting(cfg)['text']
            == setting({'model.mix_temperature': 0.05, 'model.mix_weight': 2.0})['text'])


def test_a_missing_file_gives_no_overrides(tmp_path):
    cfg = load_config(MIXCO_PATH, {'model.mix_temperature': 0.1})
    out = config_setting(cfg, str(tmp_path / 'gone.py'))
    assert out['overrides'] == {} and out['text'] == setting({'model.mix_temperature': 0.1})['text']


def test_the_filled_preprocessor_size_is_no_override():
    """Device views: the preprocessor's input_size follows the dataset's (fill_view_size), so
    a changed input_size is one override, and a config read without the fill has one text."""
    plain = read_config(GPU_VIEWS)
    assert plain.model.data_preprocessor.get('input_size') is None
    shipped = setting(config=GPU_VIEWS)
    assert shipped['overrides'] == {} and config_setting(plain) == shipped
    out = setting({'train_dataloader.dataset.input_size': 32}, config=GPU_VIEWS)
    assert out['overrides'] == {'train_dataloader.dataset.input_size': 32}
    assert out['text'] != shipped['text']
    merge_options(plain, {'train_dataloader.dataset.input_size': 32})  # as tools/eval.py reads
    assert config_setting(plain) == out
    read = read_config(GPU_VIEWS)  # the file as a suite has read it already: the same, unchanged
    assert config_setting(plain, GPU_VIEWS, read) == out and read.to_dict() == \
        read_config(GPU_VIEWS).to_dict()


def read_records(folder):
    return [json.loads(p.read_text()) for p in sorted((folder / 'runs').glob('*.json'))]


@pytest.mark.slow
def test_eval_tool_records_setting_and_overrides(tmp_path, run_main):
    """tools/eval.py CONFIG random with two seeds: one setting (as tools/train.py's
    load_config would give it), two config hashes, the options as overrides."""
    options = ['train_dataloader.dataset.input_size=8', 'model.mix_temperature=0.1']
    for seed, results in ((0, tmp_path / 'r0'), (1, tmp_path / 'r1')):
        code, out, err, _ = run_main(eval_tool, MIXCO, 'random', '--protocols', 'knn',
                                     '--num-workers', '0', '--batch-size', '512',
                                     '--results-dir', results, '--cfg-options', *options,
                                     f'randomness.seed={seed}')
        assert code == 0, err[-2000:]
        assert 'record: ' in out
    (one,), (two,) = read_records(tmp_path / 'r0'), read_records(tmp_path / 'r1')
    expected = {'train_dataloader.dataset.input_size': 8, 'model.mix_temperature': 0.1}
    assert one['overrides'] == two['overrides'] == expected
    assert (one['seed'], two['seed']) == (0, 1)
    assert one['setting_sha256'] == two['setting_sha256']
    assert len(one['setting_sha256']) == 64
    assert one['config_sha256'] != two['config_sha256']
    trained = load_config(MIXCO_PATH, {'train_dataloader.dataset.input_size': 8,
                                       'model.mix_temperature': 0.1, 'randomness.seed': 0},
                          work_dir=str(tmp_path / 'w'))
    assert one['setting_sha256'] == setting_sha256(config_setting(trained, MIXCO)['text'],
                                                   one['world_size'])
    assert one['config_sha256'] == hashlib.sha256(config_identity(trained).encode()).hexdigest()


def test_an_int_for_a_float_is_an_override_as_it_changes_the_setting():
    cfg = load_config('configs/mixco_r18_digits.py', {'model.mix_weight': 1})
    shipped = load_config('configs/mixco_r18_digits.py')
    assert config_setting(cfg)['overrides'] == {'model.mix_weight': 1}
    assert config_setting(cfg)['text'] != config_setting(shipped)['text']


def test_bookkeeping_hooks_are_not_part_of_either_identity():
    """The runtime-info hook only moves logged values: a config without it (as configs were
    before it was listed) hashes and reads as the same setting."""
    with_hook = load_config('configs/mixco_r18_digits.py')
    without = load_config('configs/mixco_r18_digits.py')
    without.default_hooks.pop('runtime_info')
    assert with_hook.default_hooks.runtime_info.type == 'DeferredRuntimeInfoHook'
    assert config_identity(with_hook) == config_identity(without)
    assert config_setting(with_hook)['text'] == config_setting(without)['text']
    assert config_setting(with_hook)['overrides'] == {}
    changed = load_config('configs/mixco_r18_digits.py', {'default_hooks.logger.interval': 7})
    assert config_identity(changed) != config_identity(with_hook)  # other hooks still count
