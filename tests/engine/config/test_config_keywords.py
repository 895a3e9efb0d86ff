"""benchmark.engine.config.keywords and rules: what a component accepts, its refusals as one line
naming the key (the key its message names, or the one without which it builds), and the rules'
own one-line messages."""
import typing
from typing import Any, List, Optional, Sequence, Tuple, Union

import pytest
from mmengine.registry import Registry

from benchmark.engine.config.keywords import (ConfigError, accepted, check_call, check_keys,
                                              lookup, named_keys, plain_types, refused)
from benchmark.engine.config.rules import choice, number, steps


def message(fn, *args) -> str:
    with pytest.raises(ConfigError) as err:
        fn(*args)
    assert '\n' not in str(err.value)
    return str(err.value)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_unknown_key_with_did_you_mean():
    check_keys({'seed': 0}, ['seed', 'randomness'], '')
    assert message(check_keys, {'randomnes': 1}, ['seed', 'randomness'], '') == \
        "unknown key 'randomnes' (did you mean 'randomness'?)"
    assert message(check_keys, {'queue_sise': 1}, ['queue_size', 'temperature'], 'model') == \
        "unknown key 'model.queue_sise' (did you mean 'model.queue_size'?)"
    assert message(check_keys, {'zzz': 1}, ['queue_size'], 'model') == "unknown key 'model.zzz'"


def test_a_registered_name_with_a_prefix_did_you_mean():
    """'Wandb' is too short for difflib to match 'WandbVisBackend'; the prefix rule finds it."""
    registry = Registry('vis_backend_test')

    @registry.register_module()
    class WandbVisBackend:  # noqa: D401
        def __init__(self, project: str = 'x') -> None:
            self.project = project

    assert message(lookup, registry, 'Wandb', 'v.vis_backends.0') == \
        "v.vis_backends.0.type: unknown vis_backend_test 'Wandb' (did you mean 'WandbVisBackend'?)"
    assert lookup(registry, 'WandbVisBackend', 'v') is WandbVisBackend
    check_call(dict(type='WandbVisBackend', project='p'), WandbVisBackend, 'v', extra={'type'})
    assert message(check_call, dict(type='WandbVisBackend'), WandbVisBackend, 'v') == \
        "unknown key 'v.type'"  # only a registry's sections name a type
    assert message(check_call, dict(projet='p'), WandbVisBackend, 'v') == \
        "unknown key 'v.projet' (did you mean 'v.project'?)"
    assert message(check_call, dict(project=3), WandbVisBackend, 'v') == \
        'v.project must be a string, got 3'


@pytest.mark.parametrize('annotation,types', [
    (int, (int,)), (float, (float,)), (bool, (bool,)), (Optional[int], (int, type(None))),
    (Union[int, str], (int, str)), (int | None, (int, type(None))),
    (Sequence[int], (list, tuple, str)), (List[int], (list, tuple)),
    (Tuple[int, int], (list, tuple)),
    (None, (type(None),)), (Any, None), (Union[int, Registry], None),  # says more: not checked
])
def test_plain_types(annotation, types):
    assert plain_types(annotation) == types


@pytest.mark.parametrize('value,annotation,ok', [
    (True, int, False), (True, bool, True), (3, float, True), (3.0, int, False),
    ('ab', typing.Sequence, True), (None, int, False)])
def test_a_value_of_the_annotated_type_passes(value, annotation, ok):
    def fn(x: annotation = None):
        pass

    if ok:
        check_call(dict(x=value), fn, 'p')
    else:
        assert message(check_call, dict(x=value), fn, 'p') == \
            f'p.x must be an integer, got {value!r}'


def test_types_come_from_annotations_or_a_true_false_default():
    def fn(a: int = 0, b: Optional[float] = None, c: typing.Sequence = (), flag=False, d=None):
        pass

    check_call(dict(a=1, b=2, c=[1], flag=True, d=object()), fn, 'x')
    assert message(check_call, dict(a='1'), fn, 'x') == "x.a must be an integer, got '1'"
    assert message(check_call, dict(b='1'), fn, 'x') == "x.b must be a number or None, got '1'"
    assert message(check_call, dict(flag='maybe'), fn, 'x') == \
        "x.flag must be True or False, got 'maybe'"


def test_keywords_follow_kwargs_up_the_init_chain():
    class Base:
        def __init__(self, depth: int = 18):
            pass

    class Child(Base):
        def __init__(self, width: int = 1, **kwargs):
            super().__init__(**kwargs)

    params, open_ended = accepted(Child)
    assert set(params) == {'width', 'depth'} and open_ended is False
    assert params['depth'].annotation is int


def test_the_key_a_message_is_about():
    section = dict(type='M', temperature=-0.1, mix_temperature=0.05, queue=dict(size=0),
                   signals=['SIGTREM'], lr=-0.5)
    assert named_keys(section, 'model.temperature must be > 0, got -0.1') == ['temperature']
    assert named_keys(section, 'size must be >= 1') == ['queue.size']  # the value, not its dict
    assert named_keys(section, "unknown signal 'SIGTREM'") == ['signals.0']  # quoted
    assert named_keys(section, 'Invalid learning rate: -0.5') == ['lr']


def test_a_refusal_names_the_key_its_value_and_a_did_you_mean():
    section = dict(type='M', pairing='halfs', view=dict(name='raw', size=8), a=1, b=1)
    err = ValueError("pairing 'halfs' not in ('halves', 'permutation')")
    assert str(refused(err, section, 'model', 'M')) == (
        "model.pairing='halfs' refused by M: pairing 'halfs' not in ('halves', 'permutation') "
        "(did you mean 'halves'?)")
    err = TypeError("RawImage.__init__() got an unexpected keyword argument 'size'")
    assert str(refused(err, section, 'd', 'D')) == \
        "unknown key 'd.view.size' (RawImage takes no such argument)"
    err = TypeError("M.__init__() got an unexpected keyword argument 'pairng'")
    assert str(refused(err, section, 'model', 'M', ['pairing'])) == \
        "unknown key 'model.pairng' (did you mean 'model.pairing'?) (M takes no such argument)"

    def build(given):  # refuses b in words that name nothing
        if 'b' in given:
            raise ValueError('too much')
    assert str(refused(ValueError('too much'), section, 'x', 'M', retry=build)) == \
        'x.b=1 refused by M: too much'  # the key without which it builds
    assert str(refused(ValueError('too much'), section, 'x', 'M')) == 'x refused by M: too much'


def test_rules_say_what_they_want_in_one_line():
    size = number('>= 1', whole=True)
    size(1, 'p')
    assert message(size, 0, 'train_cfg.max_epochs') == 'train_cfg.max_epochs must be >= 1, got 0'
    assert message(size, True, 'p') == 'p must be an integer, got True'
    assert message(number('in [0, 4294967296)', whole=True), 2 ** 32, 'p') == \
        'p must be in [0, 4294967296), got 4294967296'
    assert message(number('> 0'), 0, 'lr') == 'lr must be > 0, got 0'
    assert message(number('>= 0'), -0.5, 'm') == 'm must be >= 0, got -0.5'
    number('in [0, 1]')(1, 'd') or number('in (0, 1]')(1, 'f') or number('>= 0')(0, 'm')
    assert message(number('in [0, 1)'), 1, 'm') == 'm must be in [0, 1), got 1'
    assert message(number('in (0, 1]'), 0, 'f') == \
        'f must be in (0, 1], got 0'
    assert message(choice('fork', 'spawn'), 'forks', 'p') == \
        "p: unknown value 'forks' (did you mean 'fork'?); valid: fork, spawn"
    choice(True, False)(True, 'p')
    assert message(choice(True, False), 1, 'p') == "p: unknown value 1; valid: True, False"
    assert message(steps(), [3, 2], 'p') == 'p must increase, got [3, 2]'
    assert message(steps(pairs=True), [[1]], 'p') == \
        'p.0 must be a [milestone, interval] pair, got [1]'
    steps(pairs=True)([[1, 2], [5, 1]], 'p')
