"""Every tool stops on Ctrl-C or SIGTERM: a real signal to this process while the tool's main
work runs (the work replaced by one that signals itself mid-way) ends it with 130 or 143 and
one stop line, writing nothing; tools/train.py ends on Ctrl-C with its line and 130 (SIGTERM is
its pre-emption: tests/engine/test_preemption.py). The real process (Ctrl-C to the speed
harness with its loader workers): tests/e2e/test_speed_tool_runs.py."""
import os
import runpy
import signal
import sys
import time

import pytest

import benchmark.engine.launch
import benchmark.harness.faults.kill_resume as kill_resume_work
from benchmark import stop
from tests.conftest import ROOT
from tools import (benchmark_speed, calibrate_stats, eval as eval_tool, export, fault_campaign,
                   kill_resume, leaderboard, prepare_data, run_suite)

DIGITS = 'configs/mixco_r18_digits.py'


def _interrupted(sig):
    def work(*args, **kwargs):
        os.kill(os.getpid(), sig)
        time.sleep(10)
        raise AssertionError('the signal did not stop the tool')
    return work


# tool, the attribute its main work is, arguments (tmp_path formats into them)
TOOLS = [
    (benchmark_speed, (benchmark_speed, 'run'), ['--only', 'knn', '--out', '{tmp}/s.json']),
    (leaderboard, (leaderboard, 'render_leaderboard'), ['--results-dir', '{tmp}']),
    (calibrate_stats, (calibrate_stats, 'calibration_table'), ['--reps', '10']),
    (prepare_data, (prepare_data, 'verify'), ['check', 'folder', '--root', '{tmp}']),
    (export, (export, 'export_backbone'), ['random', '--format', 'torchvision', '--config',
                                           DIGITS, '--out', '{tmp}/w.pth']),
    (eval_tool, (eval_tool, 'evaluate_checkpoint'), [DIGITS, 'random', '--results-dir', '{tmp}']),
    (run_suite, (run_suite, 'run_suite'), ['demo_digits', '--results-root', '{tmp}']),
    (fault_campaign, (fault_campaign, 'make_fake_tiny_imagenet'), ['--out', '{tmp}', '--only',
                                                                    'records']),
    (kill_resume, (kill_resume_work, 'kill_and_resume'),
     [DIGITS, '--kill-at', '2', '--data-root', '{tmp}', '--work-dir', '{tmp}/work',
      '--out', '{tmp}/r.json']),
]


@pytest.mark.parametrize('tool, target, args', TOOLS, ids=[t[0].__name__ for t in TOOLS])
def test_every_tool_stops_with_128_plus_the_signal_and_writes_nothing(tool, target, args,
                                                                     tmp_path, run_main,
                                                                     monkeypatch):
    sig = signal.SIGTERM if TOOLS.index((tool, target, args)) % 2 else signal.SIGINT
    monkeypatch.setattr(*target, _interrupted(sig))
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err, _ = run_main(tool, *(a.format(tmp=tmp_path) for a in args))
    assert code == 128 + sig, err[-2000:]
    assert err.splitlines()[-1].startswith(f'{sig.name}: stopped; finished '), err[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no file, whole or partial


def test_ctrl_c_ends_a_training_with_one_line_and_130(monkeypatch, capsys):
    """tools/train.py as a script: Ctrl-C while it loads its config ends the process at once
    (os._exit, here recorded) with 130 and the line saying how to go on."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(benchmark.engine.launch, 'load_config', _interrupted(signal.SIGINT))
    monkeypatch.setattr(sys, 'argv', ['tools/train.py', DIGITS])

    def ended(code):
        raise SystemExit(f'os._exit({code})')
    monkeypatch.setattr(stop, 'exit_at_once', ended)  # os._exit after multiprocessing's folder
    with pytest.raises(SystemExit) as end:
        runpy.run_path('tools/train.py', run_name='__main__')
    assert end.value.code == 'os._exit(130)'
    assert capsys.readouterr().err.splitlines()[-1] == 'SIGINT: stopped; rerun with --resume'
