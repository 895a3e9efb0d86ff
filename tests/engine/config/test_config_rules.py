"""benchmark.engine.config.rules: every row of every table fires, each on one bad config (in
process, no component built), with its own line."""
import fnmatch

import pytest
from mmengine.registry import MODELS

import benchmark.components  # noqa: F401  registers the methods the rows read
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config.rules import BATCH, METHOD, VALUES, check_run, check_values
from benchmark.engine.train_views import PAIRING, TRAIN_VIEWS, check_pairing, place_views
from methods.simclr import SimCLR

DEVICE = dict(type='GPUViewPreprocessor', view='mocov2')


def line(check, cfg, *args) -> str:
    with pytest.raises(ConfigError) as err:
        check(cfg, *args)
    assert '\n' not in str(err.value)
    return str(err.value)


def fired(rows, text: str) -> int:
    """The row whose line `text` is: its fixed words, in order."""
    found = [i for i, (_, pattern) in enumerate(rows)
             if fnmatch.fnmatchcase(text, pattern.format_map(Any()))]
    assert len(found) == 1, (text, found)
    return found[0]


class Any(dict):
    """Formats every field as '*' (a row's line as a pattern of its fixed words)."""

    def __missing__(self, key):
        return Star()


class Star:
    def __format__(self, spec):
        return '*'

    def __getitem__(self, key):
        return self

    def __repr__(self):
        return '*'


def loader(view='mocov2', **dataset):
    return dict(batch_size=8, dataset=dict(type='Digits', view=view, **dataset))


TABLES = [  # (table, its check, [(bad config, ...more arguments)] in the table's row order)
    (TRAIN_VIEWS, lambda cfg: place_views(cfg, True), [
        (dict(train_views='gpu'),), (dict(train_views=dict(raw=1)),),
        (dict(train_views=dict(on='gpu')),), (dict(train_views=dict(compile=1)),),
        (dict(train_views=dict(graph='on')),), (dict(train_views=dict(prefetch=1)),)]),
    (PAIRING, check_pairing, [
        (dict(model=dict(data_preprocessor=DEVICE), train_dataloader=loader()),),
        (dict(model=dict(type='MoCo'), train_dataloader=loader('raw_uint8')),),
        (dict(model=dict(data_preprocessor=DEVICE),
              train_dataloader=loader('raw_uint8', input_size=0)),),
        (dict(model=dict(data_preprocessor=dict(DEVICE, input_size=8)),
              train_dataloader=loader('raw_uint8', input_size=16)),)]),
    (METHOD, check_run, [(dict(model=dict(type='UnnamedRuleMethod')), 1)]),
    (BATCH, check_run, [
        (dict(model=dict(type='MoCo'), train_dataloader=dict(batch_size=1)), 1),
        (dict(model=dict(type='MixCoMoCo'), train_dataloader=dict(batch_size=7)), 1),
        (dict(model=dict(type='MoCo', queue_size=16), train_dataloader=dict(batch_size=8)), 4),
        (dict(model=dict(type='MoCo', bn_splits=3), train_dataloader=dict(batch_size=8)), 1)]),
]


def test_each_row_of_each_table_fires_on_its_bad_config():
    class UnnamedRuleMethod(SimCLR):
        pass
    MODELS.register_module(module=UnnamedRuleMethod, force=True)
    try:
        for rows, check, bad in TABLES:
            assert len(bad) == len(rows)
            assert [fired(rows, line(check, *case)) for case in bad] == list(range(len(rows)))
    finally:
        MODELS.module_dict.pop('UnnamedRuleMethod')


def test_each_value_rule_refuses_a_negative_number_naming_its_key():
    for pattern in VALUES:
        path = ('train' + pattern[1:] if pattern.startswith('*') else pattern)
        path = path.replace('*.', '.0.').rstrip('*').replace('*', '.0.')
        assert fnmatch.fnmatchcase(path, pattern)
        cfg = value = -5
        for key in reversed(path.split('.')):
            cfg = {key: cfg}
        assert line(check_values, cfg).startswith(path), pattern
    assert line(check_values, dict(model=dict(t=float('nan')))) == \
        'model.t must be a finite number, got nan'
    check_values(dict(model=dict(t=0.5), load_from=None, randomness=dict(seed=value + 5)))
