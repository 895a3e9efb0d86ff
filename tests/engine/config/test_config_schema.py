"""benchmark.engine.config.schema: the check primitives and their one-line ConfigErrors."""
import inspect
import typing
from typing import Any, List, Optional, Sequence, Tuple, Union

import pytest
from mmengine.registry import Registry

from benchmark.engine.config.rules import ConfigError, int_at_least, momentum, one_of, positive
from benchmark.engine.config.schema import (check_component, check_keys, check_types,
                                            parameters_of, plain_types, type_ok)


def _message(fn, *args) -> str:
    with pytest.raises(ConfigError) as err:
        fn(*args)
    assert '\n' not in str(err.value)
    return str(err.value)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_unknown_key_with_did_you_mean():
    check_keys({'seed': 0}, ['seed', 'randomness'], '')
    assert _message(check_keys, {'randomnes': 1}, ['seed', 'randomness'], '') == \
        "unknown key 'randomnes' (did you mean 'randomness'?)"
    assert _message(check_keys, {'queue_sise': 1}, ['queue_size', 'temperature'], 'model') == \
        "unknown key 'model.queue_sise' (did you mean 'model.queue_size'?)"
    assert _message(check_keys, {'zzz': 1}, ['queue_size'], 'model') == "unknown key 'model.zzz'"


def test_hint_falls_back_to_a_prefix_match():
    """'Wandb' is too short for difflib to match 'WandbVisBackend'; the prefix rule finds it."""
    registry = Registry('vis_backend_test')

    @registry.register_module()
    class WandbVisBackend:  # noqa: D401
        def __init__(self, project: str = 'x') -> None:
            self.project = project

    assert _message(check_component, dict(type='Wandb'), registry, 'visualizer.vis_backends[0]') \
        == ("visualizer.vis_backends[0].type: unknown vis_backend_test 'Wandb' "
            "(did you mean 'WandbVisBackend'?)")
    check_component(dict(type='WandbVisBackend', project='p'), registry, 'v')
    assert _message(check_component, dict(type='WandbVisBackend', projet='p'), registry, 'v') \
        == "unknown key 'v.projet' (did you mean 'v.project'?)"
    assert _message(check_component, dict(project='p'), registry, 'v') == 'v.type: missing'
    assert _message(check_component, dict(type='WandbVisBackend', project=3), registry, 'v') \
        == 'v.project must be a string, got 3'


class _Custom:
    pass


@pytest.mark.parametrize('annotation,types', [
    (int, (int,)),
    (float, (float,)),
    (bool, (bool,)),
    (Optional[int], (int, type(None))),
    (Union[int, str], (int, str)),
    (int | None, (int, type(None))),
    (Optional[dict], (dict, type(None))),
    (Sequence[int], (list, tuple, str)),
    (List[int], (list, tuple)),
    (Tuple[int, int], (list, tuple)),
    (list, (list, tuple)),
    (None, (type(None),)),
    (Any, None),
    (_Custom, None),
    (Union[int, _Custom], None),  # says more than we check: not checked at all
    (inspect.Parameter.empty, None),
])
def test_plain_types(annotation, types):
    assert plain_types(annotation) == types


@pytest.mark.parametrize('value,allowed,ok', [
    (True, (int,), False),  # a bool is no integer here
    (True, (bool,), True),
    (3, (float,), True),  # an int is a number
    (3.0, (int,), False),
    ('ab', (list, tuple, str), True),
    ([1], (list, tuple), True),
    (None, (int, type(None)), True),
    (None, (int,), False),
])
def test_type_ok(value, allowed, ok):
    assert type_ok(value, allowed) is ok


def test_check_types_names_the_expected_types():
    def fn(a: int = 0, b: Optional[float] = None, c: typing.Sequence = (), d=None):
        pass

    params, open_ended = parameters_of(fn)
    assert set(params) == {'a', 'b', 'c', 'd'} and open_ended is False
    check_types(dict(a=1, b=2, c=[1], d=object()), params, 'x')
    assert _message(check_types, dict(a='1'), params, 'x') == "x.a must be an integer, got '1'"
    assert _message(check_types, dict(b='1'), params, 'x') == \
        "x.b must be a number or None, got '1'"
    assert _message(check_types, dict(c=3), params, 'x') == \
        'x.c must be a list or a string, got 3'


def test_parameters_follow_kwargs_up_the_init_chain():
    class Base:
        def __init__(self, depth: int = 18):
            pass

    class Child(Base):
        def __init__(self, width: int = 1, **kwargs):
            super().__init__(**kwargs)

    params, open_ended = parameters_of(Child)
    assert params == {'width': int, 'depth': int} and open_ended is False


def test_int_at_least():
    rule = int_at_least(1)
    rule(1, 'train_cfg.max_epochs')
    assert _message(rule, 0, 'train_cfg.max_epochs') == 'train_cfg.max_epochs must be >= 1, got 0'
    assert _message(rule, True, 'p') == 'p must be an integer, got True'
    assert _message(rule, 2.0, 'p') == 'p must be an integer, got 2.0'
    assert _message(rule, None, 'p') == 'p must be an integer, got None'
    int_at_least(0, none_ok=True)(None, 'p')


def test_one_of():
    rule = one_of(('strict', 'skip'), 'policy')
    rule('skip', 'd.bad_data')
    assert _message(rule, 'skp', 'd.bad_data') == \
        "d.bad_data: unknown policy 'skp' (did you mean 'skip'?); valid: strict, skip"
    assert _message(one_of((1, 2)), 7, 'n') == "n: unknown value 7; valid: 1, 2"


def test_number_rules():
    positive(0.5, 'lr')
    assert _message(positive, 0, 'lr') == 'lr must be > 0, got 0'
    assert _message(positive, True, 'lr') == 'lr must be a number, got True'
    momentum(0.0, 'm')
    assert _message(momentum, 1, 'm') == 'm must be in [0, 1), got 1'
