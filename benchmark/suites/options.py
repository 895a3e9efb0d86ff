"""KEY=VALUE strings of a suite's overrides: how a value passes through --cfg-options, and the
digest that names a set of them (a run's name)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Dict

from benchmark.engine.compat import parse_cfg_option
from benchmark.suites.policy import SuiteError


def option_text(value: Any) -> str:
    """The --cfg-options spelling of a value (mmengine's DictAction reads it back).

    Raises:
        SuiteError: For a value DictAction cannot carry (a dict, a string it would read as
            a number, a bool or a list, or one with spaces).
    """
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ','.join(option_text(v) for v in value)
        if isinstance(value, list):
            return f'[{inner}]'
        return f'({inner},)' if len(value) == 1 else f'({inner})'
    if isinstance(value, str):
        if parse_cfg_option(value) != value or not value or ' ' in value:
            raise SuiteError(f'override value {value!r} cannot pass through --cfg-options '
                             '(it would be read as another type, or holds spaces)')
        return value
    raise SuiteError(f'override value {value!r} ({type(value).__name__}) cannot pass through '
                     '--cfg-options; override its keys one by one (a.b.c=...)')


def parse_option(text: str) -> Any:
    """What tools/train.py's --cfg-options makes of KEY=VALUE's VALUE."""
    return parse_cfg_option(text)


def digest(overrides: Dict[str, Any]) -> str:
    """8 hex digits naming a set of overrides (order-free, stable across runs and machines)."""
    text = json.dumps({k: option_text(v) for k, v in sorted(overrides.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]
