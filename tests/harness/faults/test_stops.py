"""The stop-and-resume-at-once scenarios of the fault campaign, their parts: the scenario
list, reading the iteration a job has reached from its log, finding the trainer among its
loader workers, and what counts as passing (the real runs: tests/e2e/test_faults.py)."""
import multiprocessing
import os
import subprocess
import sys
import time

from benchmark.harness.faults import stops as st


def test_every_signal_reaches_every_target_with_one_and_two_processes():
    stops = st.scenarios()
    assert len(stops) == len(set(stops)) == 4 * 4 * 2
    assert {(s.signal, s.target) for s in stops if s.nproc == 2} == \
        {(s.signal, s.target) for s in stops if s.nproc == 1}
    assert st.Stop('SIGKILL', 'launcher', 1).launched and st.Stop('SIGTERM', 'group', 2).launched
    assert not st.Stop('SIGTERM', 'group', 1).launched  # tools/train.py alone
    assert st.Stop('SIGUSR1', 'worker', 2).name == 'sigusr1-worker-2p'


def test_the_iteration_reached_is_read_from_every_log_of_the_work_dir(tmp_path):
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    assert st.logged_iteration(str(tmp_path)) == 0
    (tmp_path / 'a' / 'a.log').write_text(
        'x - mmengine - INFO - Epoch(train) [1][ 7/8]  lr: 1e-2\n'
        'x - mmengine - INFO - Epoch(train) [2][ 3/8]  lr: 1e-2\n')
    (tmp_path / 'b' / 'b.log').write_text('Epoch(train)  [1][8/8]\n')
    assert st.logged_iteration(str(tmp_path)) == 8 + 3


def _sleep():
    time.sleep(60)


def test_the_trainer_is_told_from_its_forked_workers_by_its_parent(tmp_path):
    """A forked loader worker has its trainer's command line and environment: the trainer is
    the one whose parent is not one of them."""
    marker = str(tmp_path / 'work')
    code = ('import multiprocessing, sys, time\n'
            'from tests.harness.faults.test_stops import _sleep\n'
            'workers = [multiprocessing.get_context("fork").Process(target=_sleep) for _ in range(2)]\n'
            '[w.start() for w in workers]\n'
            'print(" ".join(str(w.pid) for w in workers), flush=True)\n'
            'time.sleep(60)\n')
    env = dict(os.environ, RANK='0', LOCAL_RANK='0', PYTHONPATH=os.getcwd())
    proc = subprocess.Popen([sys.executable, '-c', code, marker], env=env, stdout=subprocess.PIPE,
                            text=True)
    try:
        workers = sorted(map(int, proc.stdout.readline().split()))
        assert st.trainer_pid(marker) == proc.pid
        assert sorted(st.children(proc.pid)) == workers
        assert sorted(st.processes_of(marker)) == sorted([proc.pid, *workers])
    finally:
        subprocess.run(['pkill', '-KILL', '-f', marker], check=False)
        proc.wait()
    assert multiprocessing.active_children() == []


def test_an_outcome_passes_only_with_one_identical_record_and_nothing_left():
    good = st.Outcome(st.Stop('SIGTERM', 'group'), at=3, sent_to='process group 1',
                      stopped_rc=143, resumed_rc=0, differing=0, records=1)
    assert good.ok and good.line().endswith('bit-identical, 1 record')
    for change in [dict(records=2), dict(records=0), dict(differing=3), dict(differing=-1),
                   dict(resumed_rc=75), dict(left=[123]), dict(corrupt=['iter_3.pth']),
                   dict(sent_to='nothing: it ended')]:
        bad = st.Outcome(**{**good.__dict__, **change})
        assert not bad.ok and 'FAILED' in bad.line(), change

