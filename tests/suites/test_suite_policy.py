"""A suite's statistics keys read into the policy its comparisons are judged by; every bad
value is one line naming the key."""
import pytest

from benchmark.reports.comparisons import StatsPolicy
from benchmark.suites.policy import SuiteError, read_policy


def test_keys_are_read_into_the_policy_and_absent_ones_keep_the_defaults():
    assert read_policy({}, 'suite s.py') == StatsPolicy()
    policy = read_policy(dict(min_seeds=6, min_effect=1, equivalence_margin=0.5,
                              primary=dict(protocols='knn', eval_data=['digits'],
                                           methods=['mixco'])), 'suite s.py')
    assert policy == StatsPolicy(min_seeds=6, min_effect=1.0, equivalence_margin=0.5,
                                 primary_protocols=('knn',), primary_eval_data=('digits',),
                                 primary_methods=('mixco',))
    assert read_policy(dict(primary=dict(protocols=['tsne'])), 's').primary_protocols == (
        'cluster_tsne',)


@pytest.mark.parametrize('keys, words', [
    (dict(min_seeds=1), 'min_seeds must be an integer >= 2, got 1'),
    (dict(min_seeds=5.0), 'min_seeds must be an integer'),
    (dict(min_effect=0), 'min_effect must be a number > 0'),
    (dict(equivalence_margin=True), 'equivalence_margin must be a number > 0'),
    (dict(primary=['knn']), 'primary must be a dict'),
    (dict(primary=dict(protocol=['knn'])), "unknown key 'protocol' (did you mean 'protocols'?)"),
    (dict(primary=dict(protocols=['knnn'])), "unknown protocol 'knnn'"),
    (dict(primary=dict(protocols=[])), 'primary.protocols must be a non-empty list'),
    (dict(primary=dict(methods=['mocov2'])), "['mocov2'] have no baseline"),
    (dict(primary=dict(eval_data=['mnist'])), "['mnist'] unknown"),
])
def test_a_bad_value_is_one_line_naming_the_key(keys, words):
    with pytest.raises(SuiteError) as caught:
        read_policy(keys, 'suite s.py')
    message = str(caught.value)
    assert words in message and message.startswith('suite s.py: ') and '\n' not in message
