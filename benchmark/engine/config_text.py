"""A config's text as mmengine's `Config.pretty_text` writes it (what a record's config hash and
setting hash read), each top-level statement formatted once per process.

mmengine 0.10's `Config.pretty_text` formats the whole text with yapf on every call: about 85 ms
for one of our configs on a 2-core CPU, paid twice per run (its identity and its setting), so a
suite's `--dry-run` spent most of its seconds in yapf. Its text is one top-level statement per
key (`key=value`, sorted, each on lines of its own), and yapf formats each statement alone:
`pretty_text` formats statement by statement and remembers each, so the statements runs share
(all but the seed across seeds) are formatted once. The same text as mmengine's, checked over
every shipped config and a suite's variants in tests/engine/test_config_text.py. A run's Runner
gets its config as a `FormattedConfig`, so that the text mmengine writes into every checkpoint,
its log and its dump is this one too (mmengine asks for it about ten times in a short run).

`config_identity` is the text a record's ``config_sha256`` hashes; `config_setting` is what its
``setting_sha256`` and ``overrides`` come from (the same config without seed and data paths, and
where it departs from its file)."""
import copy
import functools
import json
import os.path as osp
import re
from typing import Any, Dict, Optional, Union

from mmengine.config import Config
from mmengine.config.config import FormatCode  # the formatter pretty_text calls (yapf's)

from benchmark.engine.train_views import fill_view_size

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


class FormattedConfig(Config):
    """A Config whose `pretty_text` is `pretty_text`'s: mmengine asks for the text at every
    checkpoint it saves, and when it logs and dumps the config, formatting it whole each time."""

    @property
    def pretty_text(self) -> str:
        return pretty_text(self) if self._format_python_code else super().pretty_text


def formatted(cfg: Config) -> FormattedConfig:
    """`cfg` as a `FormattedConfig` (a shallow copy, as `copy.copy` makes)."""
    out = FormattedConfig.__new__(FormattedConfig)
    out.__dict__.update(copy.copy(cfg).__dict__)
    return out


# Where and how a run is placed, not what it computes: left out of its identity, so a resumed
# run, a torchrun and a SLURM launch and another work dir give one config_sha256.
PLACEMENT_KEYS = ('work_dir', 'launcher', 'resume', 'load_from')
# Bookkeeping that never changes what a run computes, left out of its identity as well, so that
# the runtime's logging machinery can change without finished runs reading as other configs.
# Only keys added to the shipped configs after identities existed belong here (adding a key that
# older records hashed would make those records look like other configs).
BOOKKEEPING_KEYS = ('default_hooks.runtime_info',)


def _drop_bookkeeping(cfg: Config) -> None:
    for key in BOOKKEEPING_KEYS:
        *parents, leaf = key.split('.')
        node = cfg
        for part in parents:
            node = node.get(part) if hasattr(node, 'get') else None
            if node is None:
                break
        if node is not None and hasattr(node, 'pop'):
            node.pop(leaf, None)


def config_identity(cfg: Config) -> str:
    """The config's text without ``PLACEMENT_KEYS`` and ``BOOKKEEPING_KEYS``: what a record's
    config_sha256 hashes.

    Take it from the config as `load_config` (or read + `--cfg-options`) returns it, before
    the run adds wandb run ids, backends or scaled learning rates to it. tools/train.py,
    tools/eval.py and tools/run_suite.py (which plans by this hash) agree through this function.
    """
    bare = copy.deepcopy(cfg)
    for key in PLACEMENT_KEYS:
        bare.pop(key, None)
    _drop_bookkeeping(bare)
    fill_view_size(bare)  # as load_config does, so tools/eval.py's configs hash the same
    return pretty_text(bare)


# Not part of a run's setting: its seed (one setting is measured over seeds) and where its data
# lies on this machine (a dotted key ending in one of these names, at any depth).
SEED_KEY = 'randomness.seed'
PATH_NAMES = ('data_root',)


def flat_items(tree: Any, prefix: str = '') -> Dict[str, Any]:
    """{dotted key: value} of the dicts in `tree`; lists and other values are leaves."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree} if prefix else {}
    out: Dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flat_items(value, f'{prefix}.{key}' if prefix else str(key)))
    return out


def _text(value: Any) -> str:
    """How a value is written: 1 and 1.0 (or True and 1) differ, as they do in the config text."""
    return json.dumps(value, default=repr, sort_keys=True)


def _plain(value: Any) -> Any:
    """A JSON value (tuples as lists, other objects as their repr)."""
    return json.loads(json.dumps(value, default=repr))


def _is_setting(key: str) -> bool:
    return (key != SEED_KEY and key.split('.')[0] not in PLACEMENT_KEYS
            and not any(key == b or key.startswith(b + '.') for b in BOOKKEEPING_KEYS)
            and key.rsplit('.', 1)[-1] not in PATH_NAMES)


def config_setting(cfg: Config, config_file: Optional[str] = None,
                   shipped: Optional[Config] = None) -> Dict[str, Any]:
    """What a run measures, apart from its seed: {'text', 'overrides'}.

    ``text``: the config without placement keys, seed and data roots (records hash it with the
    world size into ``setting_sha256``: runs of one setting share it across seeds, machines and
    work dirs). ``overrides``: {dotted key: value} where the config departs from `config_file`
    as shipped (default: ``cfg.filename``), e.g. ``{'model.mix_temperature': 0.1}``; the seed
    and placement are left out. Take it where `config_identity` is taken. `shipped`: that file
    as read already (a suite reads each once for its many runs), left as it is.
    """
    bare = copy.deepcopy(cfg)
    for key in PLACEMENT_KEYS:
        bare.pop(key, None)
    fill_view_size(bare)
    mine = {k: v for k, v in flat_items(bare.to_dict()).items() if _is_setting(k)}
    kept: Dict[str, Any] = {}
    for key, value in mine.items():  # rebuild without the left-out keys, in the config's order
        node = kept
        *parents, leaf = key.split('.')
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    text = pretty_text(kept)
    overrides: Dict[str, Any] = {}
    source = config_file or cfg.filename
    if source and osp.isfile(source):
        shipped = (Config.fromfile(source, import_custom_modules=False) if shipped is None
                   else copy.deepcopy(shipped))
        fill_view_size(shipped, like=bare)  # its size follows the run's: input_size=N, one override
        theirs = {k: v for k, v in flat_items(shipped.to_dict()).items() if _is_setting(k)}
        overrides = {k: _plain(v) for k, v in mine.items()
                     if k not in theirs or _text(theirs[k]) != _text(v)}
        # A key gone from the config, unless a value replaced it or its parent (view=simclr
        # for view=dict(...) is one override, not one per key of the dict).
        overrides.update({k: None for k in theirs if k not in mine
                          and not any(_nested(k, m) or _nested(m, k) for m in mine)})
    return dict(text=text, overrides=overrides)


def _nested(inner: str, outer: str) -> bool:
    return inner.startswith(outer + '.')
