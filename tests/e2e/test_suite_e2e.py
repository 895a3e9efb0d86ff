"""End to end: a real two-run suite on digits (tiny sizes through the suite's cfg_options),
killed with SIGKILL in its second run and restarted with the same command from two terminals at
once (tests/e2e/conftest.py's `digits_suite`): the first run is not trained again (its files keep
their mtimes), the second resumes once, in one of the two processes (the other passes over it
and finds it done), each run has one record, the table has both.
tests/e2e/test_suite_parallel_e2e.py finds the restarted suite's weights equal to the same
suite's run two at a time, bit for bit."""
import json
import os
from pathlib import Path

from tools import run_suite


def test_killed_suite_restarts_without_retraining(digits_suite, run_main, monkeypatch):
    suite = digits_suite
    folder = suite.folder
    first_run, second_run = (Path(run.work_dir) for run in suite.runs)
    out = suite.killed_out
    assert '[1/2] mocov2_r18_digits' in out and '-> ok in' in out, out
    records = folder / 'results/suites/tiny/runs'
    assert suite.killed_records == 1
    train_log = suite.killed_train_log
    assert 'saved' in train_log and 'exiting with 143' in train_log  # saved on the way out

    # Restarted by two processes at once: one resumes the second run, the other passes over it
    # (claimed by the first), finds it done at the end, and trains nothing.
    outs = '\n\n'.join(p.stdout + p.stderr for p in suite.again)
    assert [p.returncode for p in suite.again] == [0, 0], outs[-6000:]
    (again,) = [p for p in suite.again if f'[2/2] {second_run.name}: resumed from ' in p.stdout]
    (other,) = [p for p in suite.again if p is not again]
    passed = [line for line in other.stdout.splitlines()
              if 'claimed by another suite process (pid ' in line]
    assert passed and all(line.startswith(f'[2/2] {second_run.name}: ') and line.endswith((
        'coming back to it at the end', 'waiting for it')) for line in passed), outs
    summary = next(line for line in other.stdout.splitlines() if line.startswith('summary: '))
    assert summary.startswith('summary: 2 run(s): ') and 'failed' not in summary, outs
    assert 'not reached' not in summary and 'resumed' not in summary, outs
    lines = again.stdout.splitlines()
    assert lines[1] == f'[1/2] {first_run.name}: done (records exist)'
    assert lines[2].startswith(f'[2/2] {second_run.name}: resumed from ')
    ended = [line for line in lines if line.startswith(f'[2/2] {second_run.name}: resumed from ')
             and ' -> ' in line]
    assert len(ended) == 1 and ended[0].endswith('s') and '-> ok in' in ended[0]
    assert lines[-2] == 'summary: 2 run(s): 1 done before, 1 resumed'
    # The first run was not trained again: every file it wrote is untouched.
    assert {p: p.stat().st_mtime_ns for p in first_run.iterdir() if p.is_file()} == suite.stamps
    assert (first_run / 'suite_train.log').read_text().count('\n==== ') == 1
    assert (second_run / 'suite_train.log').read_text().count('\n==== ') == 2
    found = [json.loads(p.read_text()) for p in records.glob('*.json')]
    assert sorted(r['method'] for r in found) == ['mixco', 'mocov2']
    assert all({'knn', 'linear_fast', 'online_linear'} <= set(r['protocols']) for r in found)
    mixco = next(r for r in found if r['method'] == 'mixco')
    assert mixco['pretrain_epochs'] == 2 and mixco['protocols']['online_linear']['settings']['epoch'] == 2
    board = (folder / 'results/suites/tiny/leaderboard.md').read_text()
    knn_rows = [line for line in board.splitlines() if '| kNN |' in line]
    assert len(knn_rows) == 2 and all('| ok |' in row and '(n=1)' in row for row in knn_rows)
    assert any('| linear, online (during pretraining) | MixCo (MoCo-v2) |' in line
               for line in board.splitlines())
    assert (folder / 'results/suites/tiny/curves.png').is_file()
    # A third time (in-process: the suite's processes are proven above): nothing to do.
    monkeypatch.chdir(folder)
    code, out, err, _ = run_main(run_suite, *suite.command[2:], '--dry-run')
    assert code == 0 and out.splitlines()[-1] == 'plan: 2 skip (done); 0 evaluation(s) to run', err
    assert os.path.getsize(folder / 'results/suites/tiny/leaderboard.csv') > 0
