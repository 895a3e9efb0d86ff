"""Stop signals that come before the training loop are held, not fatal: recorded while a
process started by tools/dist_train.sh imports and builds, or delivered again where no hook
will take them (PreemptionHook taking one over: tests/engine/test_preemption.py); and
tools/dist_train.sh keeps one that comes before its training processes exist."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmark.engine import held_signals
from tests.conftest import ROOT


@pytest.fixture
def restore_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
    yield
    held_signals.take()
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_a_held_signal_is_recorded_then_taken_once(restore_signals):
    held_signals.hold()
    assert held_signals.take() is None
    os.kill(os.getpid(), signal.SIGUSR1)  # the real signal: the process goes on
    os.kill(os.getpid(), signal.SIGTERM)
    assert held_signals.take() == 'SIGTERM'  # the last one
    assert held_signals.take() is None


def _python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT), **env))


def test_importing_it_holds_only_when_the_launcher_asks():
    code = ('import os, signal\nimport benchmark.engine.held_signals as h\n'
            'os.kill(os.getpid(), signal.SIGTERM)\nprint(h.take())')
    held = _python(code, TRAIN_HOLD_SIGNALS='1')
    assert (held.returncode, held.stdout) == (0, 'SIGTERM\n'), held.stderr
    assert _python(code, TRAIN_HOLD_SIGNALS='').returncode == -signal.SIGTERM


def test_a_signal_pending_from_a_blocked_start_is_held_once_the_hold_is_in_place():
    """tools/dist_train.sh starts its training processes with the signals blocked (inherited
    from torchrun): a SIGTERM sent before the interpreter has imported anything stays pending
    and is recorded when the hold unblocks it, rather than lost or fatal."""
    code = ('import os, signal\n'
            'signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})\n'
            'os.kill(os.getpid(), signal.SIGTERM)  # before the hold: pending\n'
            'import benchmark.engine.held_signals as h\n'
            'print(h.take(), signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, []))')
    held = _python(code, TRAIN_HOLD_SIGNALS='1')
    assert (held.returncode, held.stdout) == (0, 'SIGTERM False\n'), held.stderr


def test_dist_train_starts_torchrun_with_the_stop_signals_blocked():
    """The process that checks the config and then runs torchrun blocks the stop signals first
    thing and never unblocks SIGTERM or SIGUSR1 (nor holds them: a hold unblocks them in the
    main thread only, and the threads torch starts during the check would take them), so
    torchrun's children inherit them blocked (the test above: they are then held, not fatal,
    however early they come). A real launch: tests/e2e/test_cluster_signals.py."""
    script = (ROOT / 'tools' / 'dist_train.sh').read_text()
    wrapper = script[script.index("-c 'import os, runpy"):script.index('runpy.run_module')]
    lines = wrapper.split('\n')
    assert lines[1] == ('signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1, '
                        'signal.SIGINT})')
    check = next(i for i, line in enumerate(lines) if 'run_path' in line)
    assert any(line.startswith('del os.environ["TRAIN_HOLD_SIGNALS"]') for line in lines[:check])
    assert not any('SIG_UNBLOCK' in line and ('SIGTERM' in line or 'SIGUSR1' in line)
                   for line in lines)


def test_release_delivers_a_held_signal_with_its_default_action():
    code = ('import os, signal\nfrom benchmark.engine import held_signals as h\nh.hold()\n'
            'os.kill(os.getpid(), signal.SIGTERM)\nprint("held", flush=True)\nh.release()\n'
            'print("not reached")')
    proc = _python(code)
    assert (proc.returncode, proc.stdout) == (-signal.SIGTERM, 'held\n')
    quiet = _python('from benchmark.engine import held_signals as h\nh.hold()\nh.release()\n'
                    'import signal\nprint(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)')
    assert (quiet.returncode, quiet.stdout) == (0, 'True\n')


def launcher_started(script: int) -> bool:
    """The script's Python process (the config check, then torchrun) exists: it has exec'd."""
    for entry in Path('/proc').iterdir():
        try:
            if entry.name.isdigit() and int((entry / 'stat').read_text().rsplit(')', 1)[1].split()[
                    1]) == script and b'runpy' in (entry / 'cmdline').read_bytes():
                return True
        except OSError:
            continue
    return False


@pytest.mark.slow
@pytest.mark.parametrize('sent_to, when, sig, code', [
    ('the script', 'while it checks', signal.SIGTERM, 143),
    ('the whole job', 'while it checks', signal.SIGINT, 130),
    ('the script', 'as its checking process starts', signal.SIGUSR1, 143)])
def test_dist_train_stopped_during_its_config_check_starts_nothing(tmp_path, subprocess_env,
                                                                   sent_to, when, sig, code):
    """A stop signal while tools/dist_train.sh checks the config: sent to the script alone (it
    tells the checking process, once that has blocked the signal: before, the default action
    would end it without a word) or to every process of the job (as a scheduler or Ctrl-C
    does), the job ends with one line and 143 (130 for SIGINT), and nothing trains."""
    proc = subprocess.Popen(['bash', str(ROOT / 'tools' / 'dist_train.sh'),
                             'configs/mixco_r18_tiny.py', '1', '--work-dir', str(tmp_path / 'w')],
                            cwd=ROOT, env=dict(subprocess_env, PYTHON=sys.executable),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    if when == 'while it checks':
        time.sleep(1)  # the config check takes seconds: it is importing torch
    else:
        end = time.monotonic() + 60
        while not launcher_started(proc.pid) and time.monotonic() < end:
            pass
    if sent_to == 'the script':
        proc.send_signal(sig)
    else:
        os.killpg(proc.pid, sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-2000:]
    assert err.strip().splitlines()[-1] == (f'stopped by {sig.name} before training started; '
                                            'nothing to save')
    assert not list(Path(tmp_path / 'w').glob('*/*.log'))


LAUNCHED = """
import os, signal, subprocess, sys, time
child = '''
import os, signal, sys, time
import benchmark.engine.held_signals as h   # TRAIN_HOLD_SIGNALS=1: holds, and ends with its launcher
print(os.getpid(), flush=True)
for _ in range(300):
    if h.take():
        print('SIGTERM held after the launcher died', flush=True)
        break
    time.sleep(0.05)
'''
proc = subprocess.Popen([sys.executable, '-c', child], stdout=sys.stdout)
time.sleep(float(sys.argv[1]))
os._exit(0)  # the launcher dies (as a SIGKILLed torchrun would), leaving its child
"""


def test_a_training_process_is_told_when_its_launcher_dies():
    """A process started by tools/dist_train.sh gets SIGTERM (PR_SET_PDEATHSIG) the moment
    torchrun ends, and holds it as a pre-emption: it saves and exits rather than train on
    unseen, holding its work dir; started by nothing of the kind, nothing is set."""
    out = subprocess.run([sys.executable, '-c', LAUNCHED, '3'], cwd=ROOT, capture_output=True,
                         text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), TRAIN_HOLD_SIGNALS='1'))
    pid, *said = out.stdout.splitlines()
    for _ in range(100):  # the orphan says it, then ends
        if not Path(f'/proc/{pid}').exists():
            break
        time.sleep(0.1)
    said = said or []
    assert said == ['SIGTERM held after the launcher died'], (out.stdout, out.stderr)
