"""The machinery of config checks: keys from signatures, plain types, registered names, ranges.

Pure functions over a config's dicts; each failure is a `ConfigError` with one line that names
the key path. The suite's own rules (which key takes which range) are in `config_check`.
"""
import collections.abc
import difflib
import inspect
import types
import typing
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from mmengine.registry import Registry

Rule = Callable[[Any, str], None]


class ConfigError(ValueError):
    """A config key is unknown or its value is invalid; the message is one line."""


def _one_line(err: BaseException) -> str:
    text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
    return ' '.join(str(text).split())


# --- keys and types --------------------------------------------------------------------------

def _join(path: str, key: Any) -> str:
    return f'{path}.{key}' if path else str(key)


def _hint(name: Any, candidates: Iterable[str], path: str = '') -> str:
    candidates, name = sorted(map(str, candidates)), str(name)
    close = difflib.get_close_matches(name, candidates, n=1) or [  # 'Wandb' -> 'WandbVisBackend'
        c for c in candidates if name and c.lower().startswith(name.lower())][:1]
    return f' (did you mean {_join(path, close[0])!r}?)' if close else ''


def _check_keys(section: dict, allowed: Iterable[str], path: str) -> None:
    allowed = set(allowed)
    for key in section:
        if key not in allowed:
            raise ConfigError(f'unknown key {_join(path, key)!r}{_hint(key, allowed, path)}')


def _parameters(obj: Any) -> Tuple[Dict[str, Any], bool]:
    """Keyword parameters of a function or of a class's __init__ chain (with annotations), and
    whether a **kwargs leads somewhere we cannot see (then any key may be valid)."""
    is_class = inspect.isclass(obj)
    chain = [c.__dict__['__init__'] for c in obj.__mro__
             if '__init__' in c.__dict__ and c is not object] if is_class else [obj]
    params: Dict[str, Any] = {}
    for fn in chain:
        sig = inspect.signature(fn)
        for i, p in enumerate(sig.parameters.values()):
            skipped = p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)
            if skipped or (is_class and i == 0):  # `self`
                continue
            params.setdefault(p.name, _annotation(fn, p.annotation))
        if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            return params, False
    return params, True


def _annotation(fn: Callable, annotation: Any) -> Any:
    if not isinstance(annotation, str):  # `from __future__ import annotations` leaves strings
        return annotation
    try:
        return eval(annotation, getattr(inspect.unwrap(fn), '__globals__', {}))  # noqa: S307
    except Exception:  # noqa: BLE001 - an annotation we cannot resolve is not checked
        return inspect.Parameter.empty


TYPE_NAMES = {int: 'an integer', float: 'a number', bool: 'True or False', str: 'a string',
              dict: 'a dict', list: 'a list', type(None): 'None'}


def _plain_types(annotation: Any) -> Optional[tuple]:
    """The plain types an annotation allows, or None where it says more than we check."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [_plain_types(a) for a in typing.get_args(annotation)]
        return None if None in members else tuple(t for m in members for t in m)
    annotation = origin or annotation
    if annotation is collections.abc.Sequence:
        return list, tuple, str
    if annotation is list or annotation is tuple:
        return list, tuple
    if annotation is None:
        return (type(None),)
    return next(((t,) for t in TYPE_NAMES if annotation is t), None)


def _type_ok(value: Any, allowed: tuple) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int) and float in allowed:
        return True
    return isinstance(value, allowed)


def _check_types(section: dict, params: Dict[str, Any], path: str) -> None:
    for key, value in section.items():
        allowed = _plain_types(params.get(key, inspect.Parameter.empty))
        if allowed and not _type_ok(value, allowed):
            names = ' or '.join(dict.fromkeys(TYPE_NAMES.get(t, 'a list') for t in allowed))
            raise ConfigError(f'{_join(path, key)} must be {names}, got {value!r}')


def _lookup(registry: Registry, name: Any, path: str) -> Any:
    """The class or function `name` resolves to in `registry`, as Registry.build would find it."""
    if not isinstance(name, str):
        if callable(name):
            return name
        raise ConfigError(f'{path}.type must be a registered name, got {name!r}')
    found = registry.module_dict.get(name)
    if found is None:
        try:  # scoped ('mmengine.LoggerHook') or dotted names
            found = registry.get(name)
        except Exception:  # noqa: BLE001 - unknown either way
            found = None
    if found is None:
        raise ConfigError(f'{path}.type: unknown {registry.name} {name!r}'
                          f'{_hint(name, registry.module_dict)}')
    return found


def _check_kwargs(section: Any, obj: Any, path: str, rules: Optional[Dict[str, Rule]] = None,
                  supplied: Iterable[str] = (), extra: Iterable[str] = (),
                  skip_first: bool = False) -> None:
    """The keyword arguments `section` gives `obj`: known keys, then value rules, then types."""
    _require_dict(section, path)
    params, open_ended = _parameters(obj)
    if skip_first and params:  # `self` of an unbound method, the data of a collate_fn
        params.pop(next(iter(params)))
    if not open_ended:
        _check_keys(section, (set(params) - set(supplied)) | set(extra), path)
    for key, rule in (rules or {}).items():
        if key in section:
            rule(section[key], _join(path, key))
    _check_types(section, params, path)


def _check_component(section: Any, registry: Registry, path: str,
                     rules: Optional[Dict[str, Rule]] = None,
                     supplied: Iterable[str] = (), extra: Iterable[str] = (),
                     default_type: Optional[str] = None, skip_first: bool = False) -> None:
    """A `dict(type=..., **kwargs)` that `registry` builds."""
    _require_dict(section, path)
    if 'type' not in section and default_type is None:
        raise ConfigError(f'{path}.type: missing')
    obj = _lookup(registry, section.get('type', default_type), path)
    _check_kwargs(section, obj, path, rules, supplied, {'type', '_scope_', *extra}, skip_first)


def _require_dict(section: Any, path: str) -> None:
    if not isinstance(section, dict):
        raise ConfigError(f'{path} must be a dict, got {section!r}')


# --- value rules -----------------------------------------------------------------------------

def _number(value: Any, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f'{path} must be a number, got {value!r}')


def _positive(value: Any, path: str) -> None:
    _number(value, path)
    if value <= 0:
        raise ConfigError(f'{path} must be > 0, got {value}')


def _non_negative(value: Any, path: str) -> None:
    _number(value, path)
    if value < 0:
        raise ConfigError(f'{path} must be >= 0, got {value}')


def _momentum(value: Any, path: str) -> None:
    _number(value, path)
    if not 0 <= value < 1:
        raise ConfigError(f'{path} must be in [0, 1), got {value}')


def _probability(value: Any, path: str) -> None:
    _number(value, path)
    if not 0 <= value <= 1:
        raise ConfigError(f'{path} must be in [0, 1], got {value}')


def _int_at_least(low: int, none_ok: bool = False) -> Rule:
    def rule(value: Any, path: str) -> None:
        if value is None and none_ok:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f'{path} must be an integer, got {value!r}')
        if value < low:
            raise ConfigError(f'{path} must be >= {low}, got {value}')
    return rule


def _one_of(choices: tuple, noun: str = 'value') -> Rule:
    def rule(value: Any, path: str) -> None:
        if value not in choices:
            raise ConfigError(f'{path}: unknown {noun} {value!r}{_hint(value, map(str, choices))}; '
                              f"valid: {', '.join(map(str, choices))}")
    return rule
