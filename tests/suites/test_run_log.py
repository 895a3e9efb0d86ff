"""The `error:` line a step's log ends with, which a suite's status line and a SLURM task's
failure carry (tests/suites/test_suite_runner.py, tests/suites/test_suite_slurm.py)."""
from benchmark.suites.run_log import error_line, with_error_line


def test_the_last_attempts_last_line_if_it_is_an_error_line(tmp_path):
    log = tmp_path / 'suite_train.log'
    assert error_line(str(log)) is None  # no log yet
    log.write_text('\n==== 2026-11-28 10:00:00 bash tools/dist_train.sh c.py 2\nepoch 1\n'
                   'error: c.py: a.JPEG: truncated image file\n')
    assert error_line(str(log)) == 'error: c.py: a.JPEG: truncated image file'
    assert with_error_line('failed (exit 2)', str(log)) == (
        'failed (exit 2): error: c.py: a.JPEG: truncated image file')
    with open(log, 'a') as handle:  # a later attempt that died without a line
        handle.write('\n==== 2026-11-28 10:05:00 bash tools/dist_train.sh c.py 2 --resume\n'
                     'Traceback (most recent call last):\nRuntimeError: boom\n')
    assert error_line(str(log)) is None
    assert with_error_line('failed (exit 1)', str(log)) == 'failed (exit 1)'
