"""What a component accepts and how it refuses, as one line that names the config key path.

The keywords come from the ``__init__`` signatures along a class's bases (or a function's), with
the types they declare; an error a constructor raises is traced to the key its message names
(or whose value it quotes), e.g. ``model.temperature=-0.1 refused by MoCo: model.temperature
must be > 0, got -0.1``, with a did-you-mean where one fits.
"""
import collections.abc
import copy
import difflib
import inspect
import re
import types
import typing
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from mmengine.registry import Registry

from benchmark.cli import one_line


class ConfigError(ValueError):
    """A config key is unknown or its value is refused; the message is one line."""


def join_path(path: str, key: Any) -> str:
    return f'{path}.{key}' if path else str(key)


def hint(name: Any, candidates: Iterable[Any], path: str = '') -> str:
    """`` (did you mean 'path.x'?)`` for the closest candidate (or one `name` starts), else ''."""
    candidates, name = sorted(map(str, candidates)), str(name)
    close = difflib.get_close_matches(name, candidates, n=1) or [  # 'Wandb' -> 'WandbVisBackend'
        c for c in candidates if name and c.lower().startswith(name.lower())][:1]
    return f' (did you mean {join_path(path, close[0])!r}?)' if close else ''


def require_dict(section: Any, path: str) -> None:
    if not isinstance(section, dict):
        raise ConfigError(f'{path} must be a dict, got {section!r}')


def check_keys(section: dict, allowed: Iterable[str], path: str) -> None:
    allowed = set(allowed)
    for key in section:
        if key not in allowed:
            raise ConfigError(f'unknown key {join_path(path, key)!r}{hint(key, allowed, path)}')


def accepted(obj: Any) -> Tuple[Dict[str, inspect.Parameter], bool]:
    """The keyword parameters of a function, or of a class's ``__init__`` and, where it passes
    ``**kwargs`` on, its bases' (annotations resolved); and whether any key may be valid."""
    is_class = inspect.isclass(obj)
    chain = [c.__dict__['__init__'] for c in obj.__mro__
             if '__init__' in c.__dict__ and c is not object] if is_class else [obj]
    params: Dict[str, Any] = {}
    for fn in chain:
        sig = inspect.signature(fn)
        for i, p in enumerate(sig.parameters.values()):
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) and not (
                    is_class and i == 0):  # `self`
                params.setdefault(p.name, p.replace(annotation=annotation(fn, p.annotation)))
        if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
            return params, False
    return params, bool(chain)  # object.__init__ only: no keyword at all


def annotation(fn: Any, given: Any) -> Any:
    if not isinstance(given, str):  # `from __future__ import annotations` leaves strings
        return given
    try:
        return eval(given, getattr(inspect.unwrap(fn), '__globals__', {}))  # noqa: S307
    except Exception:  # noqa: BLE001 - an annotation we cannot resolve is not checked
        return inspect.Parameter.empty


TYPE_NAMES = {int: 'an integer', float: 'a number', bool: 'True or False', str: 'a string',
              dict: 'a dict', list: 'a list', type(None): 'None'}


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
    if hinted is None:
        return (type(None),)
    return next(((t,) for t in TYPE_NAMES if hinted is t), None)


def type_ok(value: Any, allowed: tuple) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    return isinstance(value, allowed) or (isinstance(value, int) and float in allowed)


def check_call(section: Any, obj: Any, path: str, skip: Iterable[str] = (),
               extra: Iterable[str] = ()) -> None:
    """The keywords `section` gives `obj`: each one it takes (else a did-you-mean over the ones
    it does), of the type its signature declares. `skip`: keys mmengine supplies itself;
    `extra`: keys mmengine reads around the call."""
    require_dict(section, path)
    params, open_ended = accepted(obj)
    for key in skip:
        params.pop(key, None)
    if not open_ended:
        check_keys(section, {*params, *extra}, path)
    for key, value in section.items():
        param = params.get(key)
        bare = param is not None and param.annotation is param.empty
        allowed = param and (plain_types(param.annotation) or (  # a True/False default says it
            (bool,) if bare and isinstance(param.default, bool) else None))
        if allowed and not type_ok(value, allowed):
            names = ' or '.join(dict.fromkeys(TYPE_NAMES.get(t, 'a list') for t in allowed))
            raise ConfigError(f'{join_path(path, key)} must be {names}, got {value!r}')


def lookup(registry: Registry, name: Any, path: str) -> Any:
    """The class or function `name` resolves to in `registry`, as Registry.build finds it."""
    if callable(name):
        return name
    if not isinstance(name, str):
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


# --- a constructor's error as one line ----------------------------------------------------------

BUILD_PREFIX = re.compile(r'^class `\w+` in [\w/.]+: ')  # what mmengine's Registry.build adds
UNEXPECTED = re.compile(r"(\w*)(?:\.__init__)?\(\) got an unexpected keyword argument '(\w+)'")


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


def without(section: dict, key: str) -> dict:
    """A copy of `section` with the key (or list item) at the dotted path `key` left out."""
    trial = copy.deepcopy(section)
    *parents, last = key.split('.')
    node: Any = trial
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node.pop(int(last) if isinstance(node, list) else last)
    return trial


def culprit(section: dict, keys: List[str], retry: Callable[[dict], Any]) -> Optional[str]:
    """The first of `keys` (deepest first) without which `retry` builds the section."""
    for key in sorted(keys, key=lambda k: -k.count('.')):
        try:
            retry(without(section, key))
        except Exception:  # noqa: BLE001 - still refused: not this key
            continue
        return key
    return None


def refused(err: BaseException, section: dict, path: str, owner: Any,
            names: Iterable[str] = (), retry: Optional[Callable[[dict], Any]] = None
            ) -> ConfigError:
    """One line for an error `owner` raised when built from `section` (at `path`): the key path,
    its value, the component's message and a did-you-mean (over `names` for a keyword). The key
    is the one the message names; where it names none or several, the one without which
    `retry` (the build again) succeeds."""
    owner = getattr(owner, '__name__', owner)
    message = BUILD_PREFIX.sub('', one_line(err)).removeprefix(f'{owner}: ')
    unexpected = UNEXPECTED.search(message)
    if unexpected:  # where it sits: a nested dict's key is another callee's (a view's)
        callee, name = unexpected.groups()
        key = next((k for k, _ in nodes(section) if k.split('.')[-1] == name), name)
        close = hint(name, names, path) if key == name else ''
        return ConfigError(f'unknown key {join_path(path, key)!r}{close} ({callee or owner} '
                           'takes no such argument)')
    keys = named_keys(section, message)
    if len(keys) != 1 and retry is not None:
        found = culprit(section, keys or [k for k, _ in nodes(section) if k != 'type'], retry)
        keys = [found] if found else keys
    if not keys:
        return ConfigError(f'{path} refused by {owner}: {message}')
    key = keys[0]
    value = dict(nodes(section))[key]
    shown = '' if isinstance(value, dict) else f'={value!r}'
    quoted, name = set(re.findall(r"'([^']+)'", message)), key.split('.')[-1]
    wrong = name if name in quoted else value if isinstance(value, str) else None
    close = hint(wrong, quoted - {wrong}) if wrong is not None else ''  # the message's choices
    return ConfigError(f'{join_path(path, key)}{shown} refused by {owner}: {message}{close}')
