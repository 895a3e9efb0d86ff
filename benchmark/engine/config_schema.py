"""The machinery of config checks: keys from signatures, plain types, registered names, ranges.

Pure functions over a config's dicts; each failure is a `ConfigError` with one line that names
the key path. The suite's own rules (which key takes which range) are in `config_check`.
"""
import collections.abc
import inspect
import types
import typing
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from mmengine.registry import Registry

from benchmark.engine.config_fields import fields_of
from benchmark.engine.config_rules import (ConfigError, Extra, Rule, Supplied, _hint,  # noqa: F401
                                           _int_at_least, _join, _momentum, _non_negative,
                                           _number, _one_of, _positive, _probability)


def _one_line(err: BaseException) -> str:
    text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
    return ' '.join(str(text).split())


# --- keys and types --------------------------------------------------------------------------

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
    if not chain:  # object.__init__ only: no keyword at all (a hook without arguments)
        return params, False
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
    """The keyword arguments `section` gives `obj`: known keys, then value rules, then types.

    The rules are the field table's for `obj` (config_fields), then `rules` (which override);
    its `Supplied` entries are not config keys, its `Extra` entries are.
    """
    _require_dict(section, path)
    params, open_ended = _parameters(obj)
    if skip_first and params:  # `self` of an unbound method, the data of a collate_fn
        params.pop(next(iter(params)))
    table = fields_of(obj)
    open_ended = open_ended and '**' not in table  # config_rules.Closed
    supplied = {*supplied, *(k for k, r in table.items() if isinstance(r, Supplied))}
    extra = {*extra, *(k for k, r in table.items() if isinstance(r, Extra))}
    if not open_ended:
        _check_keys(section, (set(params) - supplied) | extra, path)
    rest = table.get('*')
    for key, value in section.items():
        rule = (rules or {}).get(key) or table.get(key) or (rest if key in params else None)
        if rule is not None and key not in ('type', '_scope_', '**'):
            rule(value, _join(path, key))
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
