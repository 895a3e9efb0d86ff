"""Several runs at once (--parallel): slots (GPUs, or a share of the CPU cores), a
termination reaching every running child; the status lines (a run's
epoch and ETA from its progress.json, trained, the suite's ETA) and the ETA arithmetic. The
training is a stand-in script here; tests/e2e/test_suite_parallel_e2e.py trains for real."""
import json
import os
import sys
import time

import pytest

import benchmark.components  # noqa: F401
from benchmark.engine.progress import PROGRESS_FILE
from benchmark.suites import runner as runner_module
from benchmark.suites.outcome import SuiteTimes, finish_times
from benchmark.suites.process import plan_slots, visible_gpus
from benchmark.suites.runner import SuiteRunner
from benchmark.suites.spec import SuiteError
from benchmark.suites.status import StatusLines, epochs_left
from benchmark.suites.suite import run_suite

SUITE = "configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 1, 2]\nprocs = 1\n"

# Stands in for tools/dist_train.sh: notes its environment and CPU cores, marks itself started,
# waits (up to 60 s) until every run of the suite has started too, then exits 0 (else 1). Run
# one after another, the first would wait in vain.
TOGETHER = """
import json, os, sys, time
work, together = sys.argv[1], int(sys.argv[2])
root = os.path.dirname(work)
print(json.dumps(dict(omp=os.environ.get('OMP_NUM_THREADS'), port=os.environ.get('PORT'),
                      gpus=os.environ.get('CUDA_VISIBLE_DEVICES'),
                      cpus=sorted(os.sched_getaffinity(0)))), flush=True)
open(os.path.join(work, 'started'), 'w').close()
end = time.monotonic() + 60
while sum(os.path.exists(os.path.join(root, d, 'started')) for d in os.listdir(root)) < together:
    if time.monotonic() > end:
        sys.exit(1)
    time.sleep(0.05)
"""


class Printed:
    def __init__(self):
        self.lines = []

    def __call__(self, *args, end='\n', flush=False):
        self.lines.append(' '.join(map(str, args)))


def _suite(tmp_path, text=SUITE, name='par'):
    path = tmp_path / f'{name}.py'
    path.write_text(text)
    return path


def _run(path, tmp_path, **kwargs):
    printed = Printed()
    code = run_suite(str(path), results_root=str(tmp_path / 'results'),
                     work_root=str(tmp_path / 'runs'), use_wandb=False, out=printed, **kwargs)
    return code, printed.lines


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(runner_module, 'visible_gpus', lambda env: [])
    monkeypatch.setenv('WANDB_MODE', 'disabled')


# -- slots ---------------------------------------------------------------------------------------

def test_one_run_at_a_time_changes_nothing_in_the_environment():
    (slot,) = plan_slots(1, 2, ['0', '1'], [0, 1])
    assert slot.env == {} and slot.cpus is None and slot.where == ''


def test_cpu_cores_are_split_evenly_with_threads_per_process():
    a, b = plan_slots(2, 2, [], list(range(8)))
    assert (a.cpus, b.cpus) == ([0, 1, 2, 3], [4, 5, 6, 7])
    assert a.env == b.env == {'OMP_NUM_THREADS': '2'}
    assert a.where == 'CPUs 0-3, 2 thread(s) per process'
    one, two, three = plan_slots(3, 4, [], [0, 2, 4, 6, 8, 10])  # fewer cores than processes
    assert (one.cpus, two.cpus, three.cpus) == ([0, 2], [4, 6], [8, 10])
    assert one.env == {'OMP_NUM_THREADS': '1'} and one.where == 'CPUs 0,2, 1 thread(s) per process'
    assert [s.cpus for s in plan_slots(3, 1, [], [5, 7])] == [[5], [7], [5]]  # more runs than cores


def test_gpus_are_handed_out_procs_at_a_time_or_refused_in_one_line():
    a, b = plan_slots(2, 2, ['3', '5', '6', '7'], [0, 1])
    assert a.env == {'CUDA_VISIBLE_DEVICES': '3,5'} and b.env == {'CUDA_VISIBLE_DEVICES': '6,7'}
    assert a.cpus is None and b.where == 'GPUs 6,7'
    with pytest.raises(SuiteError, match=r'^--parallel 3 with 2 process\(es\) per run needs 6 '
                       r'GPUs; 4 visible: lower --parallel or --procs$'):
        plan_slots(3, 2, ['0', '1', '2', '3'], [0, 1])


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)
    assert visible_gpus({'CUDA_VISIBLE_DEVICES': '4, 6'}) == ['4', '6']
    assert visible_gpus({}) == ['0', '1']
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert visible_gpus({}) == []


@pytest.mark.slow
def test_parallel_is_refused_with_slurm_and_gpus_are_checked_before_anything_runs(
        tmp_path, no_gpu, monkeypatch):
    path = _suite(tmp_path)
    with pytest.raises(SuiteError, match='--parallel is for the local launcher'):
        _run(path, tmp_path, launcher='slurm', partition='gpu', parallel=2)
    monkeypatch.setattr(runner_module, 'visible_gpus', lambda env: ['0'])
    with pytest.raises(SuiteError, match='needs 2 GPUs; 1 visible'):
        _run(path, tmp_path, parallel=2)
    assert not (tmp_path / 'runs').exists()


# -- runs at once --------------------------------------------------------------------------------

def _together(tmp_path, monkeypatch, together):
    script = tmp_path / 'together.py'
    script.write_text(TOGETHER)
    monkeypatch.setattr(SuiteRunner, 'train_command', lambda self, plan: [
        sys.executable, str(script), plan.run.work_dir, str(together)])


def test_runs_go_side_by_side_each_with_its_cores_and_threads(tmp_path, no_gpu, monkeypatch):
    _together(tmp_path, monkeypatch, together=2)
    path = _suite(tmp_path, SUITE.replace('[0, 1, 2]', '[0, 1]'))
    code, out = _run(path, tmp_path, parallel=2)
    assert code == 0, '\n'.join(out)
    assert out[0].endswith('launcher local, 2 runs at a time; records in '
                           f"{tmp_path / 'results/suites/par'}/runs")
    slots = plan_slots(2, 1, [], sorted(os.sched_getaffinity(0)))
    for seed, slot in zip((0, 1), slots):
        work = tmp_path / f'runs/suites/par/mocov2_r18_digits-s{seed}'
        head = f'[{seed + 1}/2] mocov2_r18_digits-s{seed}: started'
        assert f'{head} ({slot.where}); log {work}/suite_train.log' in out
        assert any(line.startswith(f'{head} -> ok in ') for line in out)
        info = json.loads(next(line for line in (work / 'suite_train.log').read_text().splitlines()
                               if line.startswith('{')))
        # No PORT: tools/dist_train.sh's standalone rendezvous binds a free port itself.
        assert info['cpus'] == slot.cpus and info['omp'] == '1' and info['gpus'] is None
        assert info['port'] is None
    assert out[-2] == 'summary: 2 run(s): 2 started'


@pytest.mark.slow
def test_one_at_a_time_runs_do_not_overlap(tmp_path, no_gpu, monkeypatch):
    """The same stand-in, one slot: each waits in vain for the other (the check is real)."""
    _together(tmp_path, monkeypatch, together=2)
    script = tmp_path / 'together.py'
    script.write_text(TOGETHER.replace('60', '1'))
    code, out = _run(_suite(tmp_path, SUITE.replace('[0, 1, 2]', '[0, 1]')), tmp_path)
    assert code == 1
    first = tmp_path / 'runs/suites/par/mocov2_r18_digits-s0'
    assert f'[1/2] mocov2_r18_digits-s0: started -> failed (exit 1); log {first}/suite_train.log' in out
    info = json.loads(next(line for line in (first / 'suite_train.log').read_text().splitlines()
                           if line.startswith('{')))
    assert info['port'] is None and info['omp'] == os.environ.get('OMP_NUM_THREADS')


def test_a_termination_reaches_every_running_run_and_nothing_more_starts(tmp_path, no_gpu,
                                                                         monkeypatch):
    """Three runs, two slots: both running children save and exit 143; the third never starts."""
    script = tmp_path / 'stop.sh'
    script.write_text(f"""trap 'echo saved; exit 143' TERM
touch "$1/started"
n=0
while [ "$(ls {tmp_path}/runs/suites/par/*/started 2>/dev/null | wc -l)" -lt 2 ]; do
  sleep 0.05; n=$((n+1)); [ $n -gt 1200 ] && exit 1
done
[ "$2" = 0 ] && kill -TERM {os.getpid()}
for i in $(seq 600); do sleep 0.1; done
exit 0
""")
    monkeypatch.setattr(SuiteRunner, 'train_command', lambda self, plan: [
        'bash', str(script), plan.run.work_dir, str(plan.run.seed)])
    code, out = _run(_suite(tmp_path), tmp_path, parallel=2)
    assert code == 143
    work = tmp_path / 'runs/suites/par'
    for seed in (0, 1):
        assert any(line.startswith(f'[{seed + 1}/3] mocov2_r18_digits-s{seed}: started -> '
                                   'interrupted (exit 143)') for line in out), out
        assert 'saved' in (work / f'mocov2_r18_digits-s{seed}/suite_train.log').read_text()
    assert not (work / 'mocov2_r18_digits-s2').exists()
    assert '1 not reached' in out[-2] and 'rerun the same command' in out[-2]


# -- status lines --------------------------------------------------------------------------------

# Writes progress.json as ProgressHook does: epochs 1..3 of 4 iterations, 2 s per epoch (the
# numbers, not the time it takes), then 'trained', 1.2 s apart (the suite looks every 0.5 s).
PROGRESS = """
import json, os, sys, time
work = sys.argv[1]
time.sleep(0.6)  # starting up: an earlier attempt's progress.json is still there
def write(**state):
    state.update(max_epochs=3, max_iters=12, updated=time.time())
    tmp = os.path.join(work, '.p.tmp')
    with open(tmp, 'w') as f:
        json.dump(state, f)
    os.replace(tmp, os.path.join(work, 'progress.json'))
    time.sleep(0.6)  # the suite looks every 0.1 s (runner.POLL_S, patched)
for epoch in (1, 2, 3):
    write(phase='training', epoch=epoch, iter=4 * epoch, s_per_epoch=2.0,
          eta_s=2.0 * (3 - epoch), train_s=2.0 * epoch)
write(phase='trained', epoch=3, iter=12, s_per_epoch=2.0, eta_s=0.0, train_s=6.0)
"""


@pytest.mark.slow
def test_status_lines_show_each_run_epoch_eta_trained_and_the_suite_eta(tmp_path, no_gpu,
                                                                       monkeypatch):
    script = tmp_path / 'progress.py'
    script.write_text(PROGRESS)
    monkeypatch.setattr(SuiteRunner, 'train_command', lambda self, plan: [
        sys.executable, str(script), plan.run.work_dir])
    monkeypatch.setattr(StatusLines, 'every_s', 0.0)
    monkeypatch.setattr(runner_module, 'POLL_S', 0.1)
    stale = tmp_path / 'runs/suites/par/mocov2_r18_digits-s0'
    stale.mkdir(parents=True)  # an earlier attempt's file: never shown
    (stale / PROGRESS_FILE).write_text(json.dumps(dict(
        phase='training', epoch=9, iter=99, max_epochs=3, max_iters=12, s_per_epoch=1.0,
        eta_s=1.0, train_s=1.0, updated=time.time() - 3600)))
    code, out = _run(_suite(tmp_path, SUITE.replace('[0, 1, 2]', '[0, 1]')), tmp_path)
    assert code == 0, out
    first = [line for line in out if line.startswith('[1/2]')]
    assert not any('epoch 9/3' in line for line in out)
    assert '[1/2] mocov2_r18_digits-s0: epoch 1/3 iter 4/12 · 2.0 s/epoch · ETA 4s' in [
        line.split(' · suite ETA ')[0] for line in first]
    # The second run is queued behind: 2 s/epoch x 3 epochs counts into the suite's ETA.
    assert all(' · suite ETA ' in line for line in first if ' iter ' in line)
    assert '[1/2] mocov2_r18_digits-s0: trained in 6s (2.0 s/epoch); evaluating (default ' \
           'protocols)' in first
    assert any(line.startswith('suite: 1 run(s) done here, 1 to go · ETA ') for line in out)
    assert any(line.startswith('[2/2] mocov2_r18_digits-s1: epoch 3/3 iter 12/12') for line in out)


@pytest.mark.slow
def test_progress_lines_are_rate_limited(tmp_path, no_gpu, monkeypatch):
    script = tmp_path / 'progress.py'
    script.write_text(PROGRESS)
    monkeypatch.setattr(SuiteRunner, 'train_command', lambda self, plan: [
        sys.executable, str(script), plan.run.work_dir])  # epochs 0.6 s apart
    monkeypatch.setattr(runner_module, 'POLL_S', 0.1)
    code, out = _run(_suite(tmp_path, SUITE.replace('[0, 1, 2]', '[0]')), tmp_path)
    assert code == 0
    epochs = [line for line in out if ' iter ' in line]
    assert len(epochs) == 1 and 'epoch 1/3' in epochs[0]  # then 30 s between lines: none


def test_epochs_left_and_the_eta_arithmetic(suite_from_text):
    from benchmark.suites.plan import RunPlan
    run = suite_from_text(SUITE, 'eta.py').runs[0]
    assert epochs_left(RunPlan(run, 'start')) == 30
    assert epochs_left(RunPlan(run, 'resume', checkpoint='/w/epoch_12.pth')) == 18
    assert epochs_left(RunPlan(run, 'resume', checkpoint='/w/iter_200.pth')) == 30
    assert epochs_left(RunPlan(run, 'done')) == 0
    assert finish_times([10.0, 20.0], [30.0, 5.0], 2) == 40.0
    assert finish_times([], [30.0, 5.0, 5.0], 2) == 30.0
    assert finish_times([7.0], [], 3) == 7.0
    times = SuiteTimes(slots=2)
    assert times.run_seconds('a.py', 10) is None and times.eta([None], []) is None
    times.learn_epoch('r1', 'a.py', 2.0)
    times.learn_epoch('r1', 'a.py', 4.0)  # the run's newer measurement replaces its older one
    times.learn_epoch('r2', 'b.py', 10.0)
    assert times.seconds_per_epoch('a.py') == 4.0 and times.seconds_per_epoch('c.py') == 7.0
    times.learn_startup(8.0)  # before any run has finished: the start-ups seen
    assert times.run_seconds('a.py', 10) == 48.0
    times.learn_outside(20.0)
    assert times.run_seconds('a.py', 10) == 60.0 and times.run_seconds('a.py', 0) == 20.0
    assert times.eta([5.0, 10.0], [60.0]) == 65.0


def test_procs_replaces_the_suite_files_with_a_note(tmp_path, no_gpu):
    path = _suite(tmp_path, SUITE.replace('procs = 1', 'procs = 2'))
    code, out = _run(path, tmp_path, procs=1, dry_run=True)
    assert code == 0 and '1 process(es) each' in out[0]
    assert out[1].startswith("note: --procs 1 is another setting than the suite file's")
    assert out[1].endswith('give them their own --work-root and --results-root')
    code, out = _run(path, tmp_path, procs=2, dry_run=True)
    assert '2 process(es) each' in out[0] and not any(line.startswith('note:') for line in out)


@pytest.mark.slow
def test_a_work_dir_of_another_number_of_processes_is_refused(tmp_path, no_gpu):
    """--procs with the work root of the suite file's setting: its checkpoints are not resumed."""
    from benchmark.suites.plan import mark_work_dir
    from benchmark.suites.spec import expand_suite
    path = _suite(tmp_path, SUITE.replace('procs = 1', 'procs = 2'))
    work = tmp_path / 'runs/suites/par/mocov2_r18_digits-s0'
    mark_work_dir(expand_suite(str(path), work_root=str(tmp_path / 'runs')).runs[0])
    (work / 'epoch_3.pth').write_bytes(b'')
    assert json.loads((work / 'suite_run.json').read_text())['procs'] == 2
    with pytest.raises(SuiteError, match=r'^run mocov2_r18_digits-s0: .* holds checkpoints of 2 '
                       r'process\(es\) per run, now 1: give this setting its own --work-root'):
        _run(path, tmp_path, procs=1, dry_run=True)
    assert _run(path, tmp_path, dry_run=True)[0] == 0  # the suite file's setting: as before
