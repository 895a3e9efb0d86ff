"""What a component accepts (the keywords its signature declares, with their types) and its
errors as one line naming the config key path, with a did-you-mean where one fits."""
import collections.abc
import copy
import inspect
import re
import types
import typing
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

from benchmark.cli import did_you_mean, one_line

TYPE_NAMES = {int: 'an integer', float: 'a number', bool: 'True or False', str: 'a string',
              dict: 'a dict', list: 'a list', type(None): 'None'}
BUILD_PREFIX = re.compile(r'^class `\w+` in [\w/.]+: ')  # what mmengine's Registry.build adds
UNEXPECTED = re.compile(r"(\w*)(?:\.__init__)?\(\) got an unexpected keyword argument '(\w+)'")


class ConfigError(ValueError):
    """A config key is unknown or its value is refused; the message is one line."""


def join_path(path: str, key: Any) -> str:
    return f'{path}.{key}' if path else str(key)


def require_dict(section: Any, path: str) -> None:
    if not isinstance(section, dict):
        raise ConfigError(f'{path} must be a dict, got {section!r}')


def check_keys(section: dict, allowed: Iterable[str], path: str) -> None:
    allowed = set(allowed)
    for key in section:
        if key not in allowed:
            raise ConfigError(f'unknown key {join_path(path, key)!r}'
                              f'{did_you_mean(key, allowed, path)}')


def accepted(obj: Any) -> Tuple[dict, bool]:
    """The keyword parameters of a table {key: its types}, a function, or a class's ``__init__``
    and its bases' while it passes ``**kwargs`` on; and whether any key may be valid."""
    if isinstance(obj, dict):
        return {k: inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=t)
                for k, t in obj.items()}, False
    is_class = inspect.isclass(obj)
    chain = [c.__dict__['__init__'] for c in obj.__mro__
             if '__init__' in c.__dict__ and c is not object] if is_class else [obj]
    params: dict = {}
    for fn in chain:
        sig = inspect.signature(fn)
        for p in list(sig.parameters.values())[is_class:]:  # a class's: without `self`
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                params.setdefault(p.name, p.replace(annotation=resolved(fn, p.annotation)))
        if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            return params, False
    return params, bool(chain)  # object.__init__ only: no keyword at all


def resolved(fn: Any, hinted: Any) -> Any:
    """An annotation that `from __future__ import annotations` left a string, evaluated."""
    if not isinstance(hinted, str):
        return hinted
    try:
        return eval(hinted, getattr(inspect.unwrap(fn), '__globals__', {}))  # noqa: S307
    except Exception:  # noqa: BLE001 - an annotation we cannot resolve is not checked
        return inspect.Parameter.empty


def plain_types(hinted: Any) -> Optional[tuple]:
    """The plain types an annotation allows, or None where it says more than we check."""
    origin = typing.get_origin(hinted)
    if origin in (typing.Union, types.UnionType):
        members = [plain_types(a) for a in typing.get_args(hinted)]
        return None if None in members else tuple(t for m in members for t in m)
    hinted = origin or hinted
    if hinted is collections.abc.Sequence:
        return list, tuple, str
    if hinted is list or hinted is tuple:
        return list, tuple
    return (type(None),) if hinted is None else next(
        ((t,) for t in TYPE_NAMES if hinted is t), None)


def check_call(section: Any, obj: Any, path: str, skip: Iterable[str] = (),
               extra: Iterable[str] = ()) -> None:
    """Each key of `section` a keyword `obj` takes, of the type it declares (or a True/False
    default says). `skip`: keys mmengine passes itself; `extra`: keys it reads around the call."""
    require_dict(section, path)
    params, open_ended = accepted(obj)
    for key in skip:
        params.pop(key, None)
    if not open_ended:
        check_keys(section, {*params, *extra}, path)
    for key, value in section.items():
        param = params.get(key)
        bare = param is not None and param.annotation is param.empty
        allowed = param and (plain_types(param.annotation) or (
            (bool,) if bare and isinstance(param.default, bool) else None))
        if allowed and not (bool in allowed if isinstance(value, bool) else isinstance(
                value, allowed) or (isinstance(value, int) and float in allowed)):
            names = ' or '.join(dict.fromkeys(TYPE_NAMES.get(t, 'a list') for t in allowed))
            raise ConfigError(f'{join_path(path, key)} must be {names}, got {value!r}')


def lookup(registry: Any, name: Any, path: str) -> Any:
    """The class or function `name` resolves to in `registry`, as Registry.build finds it."""
    if callable(name):
        return name
    if not isinstance(name, str):
        raise ConfigError(f'{path}.type must be a registered name, got {name!r}')
    try:  # registry.get: scoped ('mmengine.LoggerHook') and dotted names too
        found = registry.module_dict.get(name) or registry.get(name)
    except Exception:  # noqa: BLE001 - unknown either way
        found = None
    if found is None:
        raise ConfigError(f'{path}.type: unknown {registry.name} {name!r}'
                          f'{did_you_mean(name, registry.module_dict)}')
    return found


def nodes(node: Any, path: str = '') -> Iterator[Tuple[str, Any]]:
    """(relative path, value) of every key and list item under `node`."""
    items = node.items() if isinstance(node, dict) else (
        enumerate(node) if isinstance(node, (list, tuple)) else ())
    for key, item in items:
        yield join_path(path, key), item
        yield from nodes(item, join_path(path, key))


def named_keys(section: dict, message: str) -> List[str]:
    """The keys of `section` an error message is about: the values it names (a list item by its
    list's name) if any, else the ones whose value it quotes; those it also quotes first, then
    in the message's order. A dict or list only where none of its items fits."""
    ranked = []
    for key, value in nodes(section):
        name = [p for p in key.split('.') if not p.isdigit()][-1]
        at = [m.start() for m in re.finditer(rf'\b{re.escape(name)}\b', message)]
        quoted = not isinstance(value, (bool, dict, list, tuple, type(None))) and [
            m.start() for m in re.finditer(rf'(?<![\w.]){re.escape(str(value))}(?![\w.])',
                                           message)]
        if at or quoted:
            ranked.append(((not at, isinstance(value, (dict, list, tuple))), not quoted,
                           min(at or quoted), key))
    best = min((rank[0] for rank in ranked), default=None)
    return [rank[-1] for rank in sorted(ranked) if rank[0] == best]


def culprit(section: dict, keys: List[str], retry: Callable[[dict], Any]) -> Optional[str]:
    """The first of `keys` (deepest first) without which `retry` builds the section."""
    for key in sorted(keys, key=lambda k: -k.count('.')):
        trial = copy.deepcopy(section)
        *parents, last = key.split('.')
        node: Any = trial
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node.pop(int(last) if isinstance(node, list) else last)
        try:
            retry(trial)
        except Exception:  # noqa: BLE001 - still refused: not this key
            continue
        return key
    return None


def refused(err: BaseException, section: dict, path: str, owner: Any,
            names: Iterable[str] = (), retry: Optional[Callable[[dict], Any]] = None
            ) -> ConfigError:
    """One line for the error `owner` raised when built from `section` (at `path`): the key its
    message names (an unexpected keyword with a did-you-mean over `names`) or, where it names
    none or several, the one without which `retry` builds it; its value and the message."""
    owner = getattr(owner, '__name__', owner)
    message = BUILD_PREFIX.sub('', one_line(err)).removeprefix(f'{owner}: ')
    unexpected = UNEXPECTED.search(message)
    if unexpected:  # where it sits: a nested dict's key is another callee's (a view's)
        callee, name = unexpected.groups()
        key = next((k for k, _ in nodes(section) if k.split('.')[-1] == name), name)
        close = did_you_mean(name, names, path) if key == name else ''
        return ConfigError(f'unknown key {join_path(path, key)!r}{close} ({callee or owner} '
                           'takes no such argument)')
    keys = named_keys(section, message)
    if len(keys) != 1 and retry is not None:
        found = culprit(section, keys or [k for k, _ in nodes(section) if k != 'type'], retry)
        keys = [found] if found else keys
    if not keys:
        return ConfigError(f'{path} refused by {owner}: {message}')
    value = dict(nodes(section))[keys[0]]
    shown = '' if isinstance(value, dict) else f'={value!r}'
    quoted, name = set(re.findall(r"'([^']+)'", message)), keys[0].split('.')[-1]
    wrong = name if name in quoted else value if isinstance(value, str) else None  # of its choices
    close = did_you_mean(wrong, quoted - {wrong}) if wrong is not None else ''
    return ConfigError(f'{join_path(path, keys[0])}{shown} refused by {owner}: {message}{close}')
