"""benchmark/engine/config_text.py: mmengine's config text, formatted statement by statement."""
import pytest
from mmengine.config import Config

from benchmark.engine.compat import parse_cfg_option
from benchmark.engine.config_text import formatted_statement, pretty_text
from tests.conftest import ROOT


def test_pretty_text_is_mmengines_text_for_every_shipped_config_and_a_suites_runs():
    """pretty_text formats statement by statement (each once per process): the text is
    mmengine's `Config.pretty_text` for every shipped config and for the run configs of a suite
    with variants; a config whose top-level key is not a name takes mmengine's path (which
    refuses it)."""
    import benchmark.components  # noqa: F401  the suite's types
    from benchmark.engine.config_file import merge_options, read_config
    from benchmark.suites.spec import expand_suite
    configs = [Config.fromfile(str(path)) for path in sorted((ROOT / 'configs').glob('*.py'))]
    suite = expand_suite(str(ROOT / 'configs/suites/mixco_ablation_digits.py'), seeds=[0])
    for run in suite.runs:  # each variant once (seeds differ in one statement)
        cfg = read_config(str(ROOT / run.config))
        merge_options(cfg, {key: parse_cfg_option(value) for key, value in
                            (arg.split('=', 1) for arg in run.option_args)})
        configs.append(cfg)
    for cfg in configs:
        assert pretty_text(cfg) == cfg.pretty_text, cfg.filename
    odd = Config({'not a name': 1, 'model': dict(type='X', depth=18)})
    with pytest.raises(SyntaxError, match='Failed to format the config'):
        pretty_text(odd)  # mmengine's own path, and its error


def test_pretty_text_formats_a_statement_once():
    """Two seeds of one config: the second formats only its `randomness` statement."""
    cfg = Config.fromfile(str(ROOT / 'configs/mixco_r18_digits.py'))
    pretty_text(cfg)
    cfg.merge_from_dict({'randomness.seed': 12345})
    before = formatted_statement.cache_info()
    pretty_text(cfg)
    after = formatted_statement.cache_info()
    assert after.misses - before.misses == 1 and after.hits - before.hits == len(cfg.keys()) - 1


def test_a_runs_config_formats_each_statement_once_however_often_mmengine_asks(monkeypatch):
    """The Runner's config (`formatted`): mmengine's text, each statement formatted once across
    the checkpoints, logs and dumps of a run, following changes; unformatted text as mmengine's."""
    import copy

    from benchmark.engine import config_text
    from benchmark.engine.config_text import FormattedConfig, formatted
    cfg = Config.fromfile(str(ROOT / 'configs/mocov2_r18_digits.py'))
    cfg.merge_from_dict({'randomness.seed': 4321})  # a statement no other test formats
    calls, format_code = [], config_text.FormatCode

    def counted(*args, **kwargs):
        calls.append(1)
        return format_code(*args, **kwargs)
    monkeypatch.setattr(config_text, 'FormatCode', counted)
    config_text.formatted_statement.cache_clear()
    run = copy.deepcopy(formatted(cfg))  # as Runner.from_cfg copies it
    assert type(run) is FormattedConfig
    for _ in range(3):
        assert run.pretty_text == cfg.pretty_text
    assert len(calls) == len(cfg.keys())
    run.merge_from_dict({'train_cfg.max_epochs': 7})
    assert run.pretty_text == Config(run.to_dict()).pretty_text and len(calls) == len(cfg.keys()) + 1
    plain = Config(cfg.to_dict(), format_python_code=False)
    assert formatted(plain).pretty_text == plain.pretty_text
