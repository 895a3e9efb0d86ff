"""Carrying out a plan locally: a failing run (its row and its log), and SIGTERM reaching the
running training. The SLURM launcher: test_suite_slurm.py."""
import os
import signal

import pytest

import benchmark.components  # noqa: F401
from benchmark.suites.suite import run_suite
from benchmark.suites.outcome import summary_line
from benchmark.suites.runner import SuiteRunner


class Printed:
    """Stands in for print: keeps the text, `end=''` continuing a line."""

    def __init__(self):
        self.text = ''

    def __call__(self, *args, end='\n', flush=False):
        self.text += ' '.join(map(str, args)) + end


def _run(path, tmp_path, **kwargs):
    printed = Printed()
    code = run_suite(str(path), results_root=str(tmp_path / 'results'),
                     work_root=str(tmp_path / 'work'), use_wandb=False, out=printed, **kwargs)
    return code, printed.text.splitlines()


def test_failed_run_is_reported_with_its_log_and_its_row(tmp_path, monkeypatch):
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    path = tmp_path / 'fail.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 1]\n")
    said = 'echo "error: c.py: a.JPEG: truncated" >&2; exit 2'  # seed 1: dist_train.sh's line
    monkeypatch.setattr(SuiteRunner, 'train_command', lambda self, plan: [
        'bash', '-c', f'echo boom {plan.run.seed}; exit 7' if plan.run.seed == 0 else said])
    code, out = _run(path, tmp_path)
    log = tmp_path / 'work/suites/fail/mocov2_r18_digits-s0/suite_train.log'
    assert code == 1
    assert out[1:3] == [f'[1/2] mocov2_r18_digits-s0: started; log {log}',
                        f'[1/2] mocov2_r18_digits-s0: started -> failed (exit 7); log {log}']
    assert (f'[2/2] mocov2_r18_digits-s1: started -> failed (exit 2): error: c.py: a.JPEG: '
            f"truncated; log {str(log).replace('-s0', '-s1')}") in out
    assert 'boom 0' in log.read_text()
    assert out[-2].startswith('summary: 2 run(s): 2 failed (failed: mocov2_r18_digits-s0, '
                              'mocov2_r18_digits-s1)')
    board = (tmp_path / 'results/suites/fail/leaderboard.md').read_text()
    rows = [line for line in board.splitlines() if '| kNN | MoCo-v2 |' in line]
    assert len(rows) == 1 and '| this suite | failed | NA |' in rows[0]
    assert f'training failed; log {log}' in rows[0]


@pytest.fixture(params=['unblocked', 'blocked by the caller'])
def stop_signal_mask(request):
    """The suite started with SIGTERM unblocked, or blocked by whatever started it (the
    children would inherit it blocked, and a trap never runs); the caller's mask after."""
    block = request.param != 'unblocked'
    before = signal.pthread_sigmask(signal.SIG_BLOCK if block else signal.SIG_UNBLOCK,
                                    {signal.SIGTERM})
    yield
    assert (signal.SIGTERM in signal.pthread_sigmask(signal.SIG_SETMASK, before)) is block


@pytest.mark.parametrize('sig, code', [('TERM', 143), ('INT', 130)])
def test_sigterm_reaches_the_training_and_stops_the_suite(tmp_path, monkeypatch,
                                                         stop_signal_mask, sig, code):
    """The child traps TERM as tools/dist_train.sh does (save, exit 143); the suite, stopped
    by SIGTERM or Ctrl-C, passes it on and exits 128 + its signal."""
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    path = tmp_path / 'stop.py'
    path.write_text("configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 1]\n")
    script = (f"trap 'echo saved; exit 143' TERM; kill -{sig} {os.getpid()}; "
              "for i in $(seq 100); do sleep 0.1; done; exit 0")
    monkeypatch.setattr(SuiteRunner, 'train_command', lambda self, plan: ['bash', '-c', script])
    code_, out = _run(path, tmp_path)
    assert code_ == code
    assert out[2].startswith('[1/2] mocov2_r18_digits-s0: started -> interrupted (exit 143)')
    assert not any('mocov2_r18_digits-s1' in line for line in out[3:-2])  # not started
    assert 'not reached' in out[-2] and 'rerun the same command' in out[-2]
    assert 'saved' in (tmp_path / 'work/suites/stop/mocov2_r18_digits-s0/suite_train.log').read_text()


def test_summary_line_counts():
    from types import SimpleNamespace

    from benchmark.suites.outcome import Outcome
    run = lambda name: SimpleNamespace(name=name)  # noqa: E731
    outcomes = [Outcome(run('a'), 'done'), Outcome(run('b'), 'resumed'),
                Outcome(run('c'), 'started', failed_evals={'linear_paper': 'x.log'}),
                Outcome(run('d'), 'failed', ok=False)]
    assert summary_line(outcomes, 5, False) == ('5 run(s): 1 done before, 1 resumed, 1 started, '
                                                '1 failed (failed: d); 1 evaluation(s) failed; '
                                                '1 not reached')
    passed = [Outcome(run('a'), 'started'), Outcome(run('b'), 'passed over')]  # interrupted
    assert summary_line(passed, 2, True) == ('2 run(s): 1 started; 1 not reached; interrupted: '
                                             'rerun the same command to continue')
