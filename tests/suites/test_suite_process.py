"""LoggedChild: output appended to the log with a header per command, the exit status returned,
a termination reaching the running command; duration's format."""
import signal
import sys
import threading
import time

from benchmark.suites.process import LoggedChild, duration


def test_output_is_appended_with_a_header_per_command(tmp_path):
    log = tmp_path / 'sub' / 'run.log'
    child = LoggedChild({})
    assert child.run([sys.executable, '-c', 'print("first")'], str(log)) == 0
    assert child.run([sys.executable, '-c', 'import sys; print("second"); sys.exit(3)'],
                     str(log)) == 3
    text = log.read_text()
    assert text.count('\n==== ') == 2 and text.index('first') < text.index('second')
    assert child.proc is None


def test_terminate_reaches_the_running_command(tmp_path):
    child = LoggedChild({})
    script = ('import signal, sys, time\n'
              'signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n'
              'print("ready", flush=True)\ntime.sleep(60)\n')
    log = tmp_path / 'run.log'
    result = {}
    thread = threading.Thread(target=lambda: result.update(
        code=child.run([sys.executable, '-c', script], str(log))))
    thread.start()
    deadline = time.monotonic() + 30
    while ('ready' not in (log.read_text() if log.exists() else '').splitlines()
           and time.monotonic() < deadline):  # the header line quotes the script: a whole line
        time.sleep(0.05)
    child.terminate()
    thread.join(30)
    assert result['code'] == 143
    child.terminate()  # nothing running: a no-op
    assert signal.SIGTERM == 15


def test_duration_reads_as_minutes_and_seconds():
    assert duration(42.4) == '42s' and duration(185) == '3m05s' and duration(60) == '1m00s'


def test_a_termination_during_the_start_reaches_the_child(tmp_path):
    """A SIGTERM the suite takes while its child is being started (before the child's handle
    exists) is sent to the child as soon as it runs, not lost."""
    import os

    child = LoggedChild(dict(os.environ))
    child.terminate()  # as the signal handler does, with no child yet
    code = child.run(['bash', '-c', "trap 'echo saved; exit 143' TERM; "
                      'for i in $(seq 100); do sleep 0.1; done; exit 0'], str(tmp_path / 'log'))
    assert code in (143, -15)  # the trap, or TERM before bash installed it
