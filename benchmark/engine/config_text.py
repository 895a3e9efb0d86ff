"""A config's text as mmengine's `Config.pretty_text` writes it (what a record's config hash and
setting hash read), each top-level statement formatted once per process.

mmengine 0.10's `Config.pretty_text` formats the whole text with yapf on every call: about 85 ms
for one of our configs on a 2-core CPU, paid twice per run (its identity and its setting), so a
suite's `--dry-run` spent most of its seconds in yapf. Its text is one top-level statement per
key (`key=value`, sorted, each on lines of its own), and yapf formats each statement alone:
`pretty_text` formats statement by statement and remembers each, so the statements runs share
(all but the seed across seeds) are formatted once. The same text as mmengine's, checked over
every shipped config and a suite's variants in tests/engine/test_config_text.py."""
import functools
import re
from typing import Union

from mmengine.config import Config
from mmengine.config.config import FormatCode  # the formatter pretty_text calls (yapf's)

YAPF_STYLE = dict(based_on_style='pep8', blank_line_before_nested_class_or_def=True,
                  split_before_expression_after_opening_paren=True)  # as mmengine's pretty_text
STATEMENT = re.compile(r'^(?=[A-Za-z_]\w*=)', re.M)  # where each top-level `key=...` starts


@functools.lru_cache(maxsize=4096)
def formatted_statement(text: str) -> str:
    return FormatCode(text, style_config=YAPF_STYLE)[0]


def pretty_text(cfg: Union[Config, dict]) -> str:
    """`Config(cfg).pretty_text`, the same text, each statement formatted once per process."""
    tree = cfg.to_dict() if isinstance(cfg, Config) else cfg
    raw = Config(tree, format_python_code=False).pretty_text
    if not STATEMENT.match(raw):  # a top-level key that is not a name: mmengine's {...} form
        return Config(tree).pretty_text
    parts = [part if part.endswith('\n') else part + '\n' for part in STATEMENT.split(raw) if part]
    return ''.join(formatted_statement(part) for part in parts)
