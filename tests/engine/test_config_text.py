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
