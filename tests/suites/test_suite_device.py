"""A suite evaluation's `device` key: checked for its spelling when the suite loads, passed to
tools/eval.py as --device, and no part of the evaluation's name (its records are the same)."""
import pytest

import benchmark.components  # noqa: F401
from benchmark.suites.runner import SuiteRunner
from benchmark.suites.spec import SuiteError

DIGITS = "configs = ['configs/mocov2_r18_digits.py']\nseeds = [0]\n"


def test_the_device_key_reaches_the_eval_command(suite_from_text):
    suite = suite_from_text(DIGITS + "evaluations = ['default', dict(protocols=['knn'], "
                            "device='cuda:1'), dict(protocols=['linear_fast'])]\n", 'dev.py')
    knn, probe = suite.evaluations[1:]
    assert (knn.name, knn.device, probe.device) == ('knn', 'cuda:1', None)
    runner = SuiteRunner(suite)
    cmd = runner.eval_command(suite.runs[0], knn, 'python')
    assert cmd[cmd.index('--device') + 1] == 'cuda:1'
    assert cmd.index('--device') < cmd.index('--cfg-options')
    assert '--device' not in runner.eval_command(suite.runs[0], probe, 'python')


@pytest.mark.parametrize('value, words', [
    ("'gpu'", "evaluations[0]: device 'gpu' is not a device"),
    ("'mps'", "evaluations[0]: device 'mps': evaluation runs on 'cpu', 'cuda' or 'cuda:N'"),
    ('1', "evaluations[0]: device must be a string such as 'cpu' or 'cuda:1', got 1"),
])
def test_a_bad_device_is_a_one_line_suite_error(suite_from_text, value, words):
    with pytest.raises(SuiteError) as info:
        suite_from_text(DIGITS + f"evaluations = [dict(protocols=['knn'], device={value})]\n",
                        'bad.py')
    assert words in str(info.value) and '\n' not in str(info.value)
