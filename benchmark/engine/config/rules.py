"""Value rules of config checks: what range or choice a field takes, as one-line ConfigErrors.

A rule is ``rule(value, path)`` that raises `ConfigError` naming ``path``. Each carries
``rule.bad``: values it must refuse, from which tests/engine/test_config_fields.py generates
its cases. `Free`, `Supplied`, `Section` and `Extra` mark table entries that are no range:
any value of the annotated type is fine (and why), set by mmengine (so not a config key),
checked as a section of its own, or read by mmengine around the constructor.
"""
import difflib
import math
import os.path as osp
import re
import signal
from typing import Any, Callable, Iterable, Optional

Rule = Callable[[Any, str], None]
NAN, INF = float('nan'), float('inf')
NOT_A_CHOICE = 'no-such-choice'


class ConfigError(ValueError):
    """A config key is unknown or its value is invalid; the message is one line."""


def with_bad(rule: Rule, *values: Any) -> Rule:
    rule.bad = values  # type: ignore[attr-defined]
    return rule


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite_number(value: Any, path: str) -> None:
    if not is_number(value):
        raise ConfigError(f'{path} must be a number, got {value!r}')
    if not math.isfinite(value):
        raise ConfigError(f'{path} must be a finite number, got {value}')


def positive(value: Any, path: str) -> None:
    finite_number(value, path)
    if value <= 0:
        raise ConfigError(f'{path} must be > 0, got {value}')


def non_negative(value: Any, path: str) -> None:
    finite_number(value, path)
    if value < 0:
        raise ConfigError(f'{path} must be >= 0, got {value}')


def momentum(value: Any, path: str) -> None:
    finite_number(value, path)
    if not 0 <= value < 1:
        raise ConfigError(f'{path} must be in [0, 1), got {value}')


def probability(value: Any, path: str) -> None:
    finite_number(value, path)
    if not 0 <= value <= 1:
        raise ConfigError(f'{path} must be in [0, 1], got {value}')


with_bad(finite_number, 'x', NAN, INF)
with_bad(positive, 0, -1, NAN, INF, '1')
with_bad(non_negative, -1, -1e-9, NAN, INF)
with_bad(momentum, 1, 1.5, -0.5, NAN)
with_bad(probability, -0.1, 1.5, NAN)


def number_in(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Rule:
    """A number in an interval, e.g. (0, 1] for a crop's minimum scale."""
    shown = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"

    def rule(value: Any, path: str) -> None:
        finite_number(value, path)
        if value < low or value > high or (low_open and value == low) or (
                high_open and value == high):
            raise ConfigError(f'{path} must be in {shown}, got {value}')
    return with_bad(rule, *([low] if low_open else []), *([high] if high_open else []),
                low - 1, high + 1, NAN)


def int_at_least(low: int, none_ok: bool = False, below: Optional[int] = None) -> Rule:
    """An integer >= low (and < below, where given); None too with none_ok."""
    def rule(value: Any, path: str) -> None:
        if value is None and none_ok:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f'{path} must be an integer, got {value!r}')
        if value < low:
            raise ConfigError(f'{path} must be >= {low}, got {value}')
        if below is not None and value >= below:
            raise ConfigError(f'{path} must be < {below}, got {value}')
    return with_bad(rule, low - 1, *([-1] if low - 1 > -1 else []), 1.5,
                *([] if none_ok else [None]), *([below] if below is not None else []))


def int_or_off(low: int = 1, off: int = -1, meaning: str = 'off') -> Rule:
    """An integer >= low, or `off` (mmengine's -1): zero is refused as ambiguous."""
    def rule(value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f'{path} must be an integer, got {value!r}')
        if value != off and value < low:
            raise ConfigError(f'{path} must be >= {low}, or {off} for {meaning}; got {value}')
    return with_bad(rule, 0, off - 1, 1.5)


def join_path(path: str, key: Any) -> str:
    return f'{path}.{key}' if path else str(key)


def hint(name: Any, candidates: Iterable[str], path: str = '') -> str:
    candidates, name = sorted(map(str, candidates)), str(name)
    close = difflib.get_close_matches(name, candidates, n=1) or [  # 'Wandb' -> 'WandbVisBackend'
        c for c in candidates if name and c.lower().startswith(name.lower())][:1]
    return f' (did you mean {join_path(path, close[0])!r}?)' if close else ''


def one_of(choices: tuple, noun: str = 'value') -> Rule:
    def rule(value: Any, path: str) -> None:
        if value not in choices:
            raise ConfigError(f'{path}: unknown {noun} {value!r}{hint(value, map(str, choices))}; '
                              f"valid: {', '.join(map(str, choices))}")
    return with_bad(rule, NOT_A_CHOICE)


def a_dict(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f'{path} must be a dict, got {value!r}')


with_bad(a_dict, 'x', [1])


def flag(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f'{path} must be True or False, got {value!r}')


with_bad(flag, 'maybe', 2)


def optional(rule: Rule) -> Rule:
    """None, or what `rule` takes."""
    def optional(value: Any, path: str) -> None:
        if value is not None:
            rule(value, path)
    return with_bad(optional, *[v for v in rule.bad if v is not None])  # type: ignore[attr-defined]


def list_of(rule: Rule, min_len: int = 1, length: Optional[int] = None,
             increasing: bool = False) -> Rule:
    """A list or tuple (of `length` items, or at least min_len) each passing `rule`."""
    def many(value: Any, path: str) -> None:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f'{path} must be a list, got {value!r}')
        if (length is not None and len(value) != length) or len(value) < min_len:
            raise ConfigError(f'{path} must have {length or f"at least {min_len}"} item(s), '
                              f'got {len(value)}')
        for i, item in enumerate(value):
            rule(item, f'{path}.{i}')
        if increasing and list(value) != sorted(set(value)):
            raise ConfigError(f'{path} must be strictly increasing, got {list(value)}')
    first_bad = [b for b in rule.bad if b is not None][:1]  # type: ignore[attr-defined]
    return with_bad(many, 'x', *([[]] if (length or min_len) else []),
                *([[*first_bad] * (length or 1)] if first_bad else []))


def regex(value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise ConfigError(f'{path} must be a regular expression string, got {value!r}')
    try:
        re.compile(value)
    except re.error as err:
        raise ConfigError(f'{path} is not a valid regular expression ({err})') from None


with_bad(regex, '(', 3)


# --- rules of particular fields (config_fields names them) ---------------------------------

def loss_scale(value: Any, path: str) -> None:
    if value == 'dynamic' or isinstance(value, dict):
        return
    if not isinstance(value, float):  # mmengine's AmpOptimWrapper takes floats, not ints
        raise ConfigError(f"{path} must be 'dynamic', a float > 0 or a dict of GradScaler "
                          f'arguments, got {value!r}')
    positive(value, path)


def clip_grad(value: Any, path: str) -> None:
    """None, or dict(type='norm', max_norm=...) / dict(type='value', clip_value=...)."""
    if value is None:
        return
    if not isinstance(value, dict) or not value:
        raise ConfigError(f'{path} must be None or a dict such as dict(max_norm=1.0), '
                          f'got {value!r}')
    kind = value.get('type', 'norm')
    one_of(('norm', 'value'), 'clip type')(kind, f'{path}.type')
    needed = 'max_norm' if kind == 'norm' else 'clip_value'
    if needed not in value:
        raise ConfigError(f'{path}.{needed}: missing (clip type {kind!r})')
    positive(value[needed], f'{path}.{needed}')
    if 'norm_type' in value:
        positive(value['norm_type'], f'{path}.norm_type')


def paramwise(value: Any, path: str) -> None:
    """DefaultOptimWrapperConstructor's multipliers: numbers >= 0, custom_keys of the same."""
    if not isinstance(value, dict):
        raise ConfigError(f'{path} must be a dict, got {value!r}')
    for key, item in value.items():
        if key == 'bypass_duplicate':
            flag(item, f'{path}.{key}')
        elif key == 'custom_keys':
            for name, mults in (item or {}).items():
                for mult, number in (mults or {}).items():
                    non_negative(number, f'{path}.custom_keys.{name}.{mult}')
        else:
            non_negative(item, f'{path}.{key}')


def custom_log(value: Any, path: str) -> None:
    """LogProcessor.custom_cfg: dict(data_src=..., method_name=mean|min|max|current, ...)."""
    if value is None:
        return
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f'{path} must be a list of dicts, got {value!r}')
    for i, item in enumerate(value):
        if not isinstance(item, dict) or 'data_src' not in item:
            raise ConfigError(f'{path}.{i} must be a dict with data_src, got {item!r}')
        one_of(('mean', 'min', 'max', 'current'), 'method')(item.get('method_name', 'current'),
                                                             f'{path}.{i}.method_name')
        window = item.get('window_size')
        if window is not None and window not in ('epoch', 'global'):
            int_at_least(1)(window, f'{path}.{i}.window_size')


def priority(value: Any, path: str) -> None:
    names = ('HIGHEST', 'VERY_HIGH', 'HIGH', 'ABOVE_NORMAL', 'NORMAL', 'BELOW_NORMAL', 'LOW',
             'VERY_LOW', 'LOWEST')
    if isinstance(value, str):
        return one_of(names, 'priority')(value, path)
    int_at_least(0, below=101)(value, path)


def signal_name(value: Any, path: str) -> None:
    one_of(tuple(s.name for s in signal.Signals), 'signal')(value, path)


def signal_names(value: Any, path: str) -> None:
    list_of(signal_name)(value, path)


def checkpoint_file(value: Any, path: str) -> None:
    """None, or a checkpoint file that exists (a stat: the file is read when training starts)."""
    if value is None:
        return
    if not isinstance(value, str):
        raise ConfigError(f'{path} must be a checkpoint path or None, got {value!r}')
    if not osp.isfile(value):
        raise ConfigError(f'{path}: checkpoint {value} not found')


def no_loader_shuffle(value: Any, path: str) -> None:
    """torch refuses shuffle=True beside a sampler, and mmengine always builds one."""
    flag(value, path)
    if value:
        raise ConfigError(f'{path}=True: the sampler shuffles; set '
                          f'{path.rpartition(".")[0]}.sampler.shuffle=True instead')


def text(value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise ConfigError(f'{path} must be a string, got {value!r}')


def template(value: Any, path: str) -> None:
    if value is not None and (not isinstance(value, str) or '{}' not in value):
        raise ConfigError(f"{path} must hold '{{}}' for the epoch or iteration, got {value!r}")


with_bad(loss_scale, 0.0, -1.0, 1, 'static')
with_bad(clip_grad, 'x', {}, dict(max_norm=0), dict(type='value'), dict(type='sum', max_norm=1))
with_bad(paramwise, 'x', dict(bias_decay_mult=-1), dict(custom_keys=dict(head=dict(lr_mult=-1))))
with_bad(custom_log, 'x', [dict(data_src='loss', method_name='median')])
with_bad(priority, 'SOMETIMES', 101, -1)
with_bad(signal_name, 'SIGNOPE')
with_bad(signal_names, ['SIGNOPE'], 'SIGTERM', [])
with_bad(checkpoint_file, 3, '/no/such/checkpoint.pth')
with_bad(template, 'epoch.pth')
with_bad(no_loader_shuffle, True, 'x')
with_bad(text, 3)


# --- table entries that are no range ----------------------------------------------------------

class Free:
    """Any value of the annotated type is fine; `why` says why (the table's documentation).
    `bad`: values another check refuses (a `Section`'s own check), for the generated tests."""
    bad: tuple = ()

    def __init__(self, why: str, bad: tuple = ()) -> None:
        self.why = why
        self.bad = bad or type(self).bad

    def __call__(self, value: Any, path: str) -> None:
        return None


class Section(Free):
    """A dict checked as a section of its own (by the function `why` names)."""


class Closed(Free):
    """Under the key '**': the type's **kwargs lead nowhere a config may go (unknown keys are
    errors although the signature is open)."""


class Supplied(Free):
    """Set by mmengine or the suite (`why` says who), so a config may not give it."""
    bad = ('x',)


class Extra:
    """A key read by mmengine around the constructor (not a parameter), with its own rule."""

    def __init__(self, rule: Rule, why: str) -> None:
        self.rule, self.why = rule, why
        self.bad = getattr(rule, 'bad', ())

    def __call__(self, value: Any, path: str) -> None:
        self.rule(value, path)
