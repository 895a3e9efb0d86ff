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

from benchmark.engine.config.fields import fields_of
from benchmark.engine.config.rules import ConfigError, Extra, Rule, Supplied, hint, join_path


# --- keys and types --------------------------------------------------------------------------

def check_keys(section: dict, allowed: Iterable[str], path: str) -> None:
    allowed = set(allowed)
    for key in section:
        if key not in allowed:
            raise ConfigError(f'unknown key {join_path(path, key)!r}{hint(key, allowed, path)}')


def parameters_of(obj: Any) -> Tuple[Dict[str, Any], bool]:
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
            params.setdefault(p.name, annotation_of(fn, p.annotation))
        if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            return params, False
    return params, True


def annotation_of(fn: Callable, annotation: Any) -> Any:
    if not isinstance(annotation, str):  # `from __future__ import annotations` leaves strings
        return annotation
    try:
        return eval(annotation, getattr(inspect.unwrap(fn), '__globals__', {}))  # noqa: S307
    except Exception:  # noqa: BLE001 - an annotation we cannot resolve is not checked
        return inspect.Parameter.empty


TYPE_NAMES = {int: 'an integer', float: 'a number', bool: 'True or False', str: 'a string',
              dict: 'a dict', list: 'a list', type(None): 'None'}


def plain_types(annotation: Any) -> Optional[tuple]:
    """The plain types an annotation allows, or None where it says more than we check."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [plain_types(a) for a in typing.get_args(annotation)]
        return None if None in members else tuple(t for m in members for t in m)
    annotation = origin or annotation
    if annotation is collections.abc.Sequence:
        return list, tuple, str
    if annotation is list or annotation is tuple:
        return list, tuple
    if annotation is None:
        return (type(None),)
    return next(((t,) for t in TYPE_NAMES if annotation is t), None)


def type_ok(value: Any, allowed: tuple) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int) and float in allowed:
        return True
    return isinstance(value, allowed)


def check_types(section: dict, params: Dict[str, Any], path: str) -> None:
    for key, value in section.items():
        allowed = plain_types(params.get(key, inspect.Parameter.empty))
        if allowed and not type_ok(value, allowed):
            names = ' or '.join(dict.fromkeys(TYPE_NAMES.get(t, 'a list') for t in allowed))
            raise ConfigError(f'{join_path(path, key)} must be {names}, got {value!r}')


def lookup(registry: Registry, name: Any, path: str) -> Any:
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
                          f'{hint(name, registry.module_dict)}')
    return found


def check_kwargs(section: Any, obj: Any, path: str, rules: Optional[Dict[str, Rule]] = None,
                  supplied: Iterable[str] = (), extra: Iterable[str] = (),
                  skip_first: bool = False) -> None:
    """The keyword arguments `section` gives `obj`: known keys, then value rules, then types.

    The rules are the field table's for `obj` (config_fields), then `rules` (which override);
    its `Supplied` entries are not config keys, its `Extra` entries are.
    """
    require_dict(section, path)
    params, open_ended = parameters_of(obj)
    if skip_first and params:  # `self` of an unbound method, the data of a collate_fn
        params.pop(next(iter(params)))
    table = fields_of(obj)
    open_ended = open_ended and '**' not in table  # config_rules.Closed
    supplied = {*supplied, *(k for k, r in table.items() if isinstance(r, Supplied))}
    extra = {*extra, *(k for k, r in table.items() if isinstance(r, Extra))}
    if not open_ended:
        check_keys(section, (set(params) - supplied) | extra, path)
    rest = table.get('*')
    for key, value in section.items():
        rule = (rules or {}).get(key) or table.get(key) or (rest if key in params else None)
        if rule is not None and key not in ('type', '_scope_', '**'):
            rule(value, join_path(path, key))
    check_types(section, params, path)


def check_component(section: Any, registry: Registry, path: str,
                     rules: Optional[Dict[str, Rule]] = None,
                     supplied: Iterable[str] = (), extra: Iterable[str] = (),
                     default_type: Optional[str] = None, skip_first: bool = False) -> None:
    """A `dict(type=..., **kwargs)` that `registry` builds."""
    require_dict(section, path)
    if 'type' not in section and default_type is None:
        raise ConfigError(f'{path}.type: missing')
    obj = lookup(registry, section.get('type', default_type), path)
    check_kwargs(section, obj, path, rules, supplied, {'type', '_scope_', *extra}, skip_first)


def require_dict(section: Any, path: str) -> None:
    if not isinstance(section, dict):
        raise ConfigError(f'{path} must be a dict, got {section!r}')
