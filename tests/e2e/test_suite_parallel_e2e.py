"""End to end: a real two-run suite on digits (tiny sizes) run one run at a time and with
--parallel 2 into separate roots: the same final weights bit for bit and the same recorded
metrics; the parallel runs each had their own CPU core and wrote progress.json, and the suite
showed them training and trained."""
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

import benchmark.components  # noqa: F401
from benchmark.engine.progress import read_progress
from benchmark.suites.spec import expand_suite
from tests.conftest import ROOT

SUITE = """
configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']
seeds = [0]
procs = 1
cfg_options = {'train_cfg.max_epochs': 2, 'train_dataloader.batch_size': 8,
               'train_dataloader.num_batch_per_epoch': 8, 'train_dataloader.num_workers': 0,
               'train_dataloader.persistent_workers': False, 'model.queue_size': 32,
               'custom_hooks.1.num_train': 100, 'custom_hooks.1.num_test': 50,
               'custom_hooks.1.k': 10, 'custom_hooks.2.num_test': 50}
"""


def _suite(tmp_path, env, layout, *extra):
    roots = ['--results-root', str(tmp_path / layout / 'results'),
             '--work-root', str(tmp_path / layout / 'work_dirs')]
    done = subprocess.run([sys.executable, str(ROOT / 'tools/run_suite.py'),
                           str(tmp_path / 'tiny.py'), '--no-wandb', *roots, *extra],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    spec = expand_suite(str(tmp_path / 'tiny.py'), results_root=roots[1], work_root=roots[3])
    return done.stdout.splitlines(), spec


def _metrics(results_dir):
    records = [json.loads(p.read_text()) for p in Path(results_dir, 'runs').glob('*.json')]
    return {(r['method'], r['seed']): {name: entry['metrics']
                                       for name, entry in r['protocols'].items()}
            for r in records}


def test_parallel_runs_equal_one_at_a_time(tmp_path, subprocess_env):
    (tmp_path / 'tiny.py').write_text(SUITE)
    env = dict(subprocess_env, PYTHON=sys.executable)  # OMP_NUM_THREADS=1 in both layouts
    _, one = _suite(tmp_path, env, 'one')
    out, two = _suite(tmp_path, env, 'two', '--parallel', '2')
    assert out[0].endswith(f"2 runs at a time; records in {two.results_dir}/runs")
    cores = sorted(os.sched_getaffinity(0))
    for index, (a, b) in enumerate(zip(one.runs, two.runs), 1):
        assert a.name == b.name and a.config_sha256 == b.config_sha256
        first = torch.load(Path(a.work_dir) / 'epoch_2.pth', map_location='cpu', weights_only=False)
        second = torch.load(Path(b.work_dir) / 'epoch_2.pth', map_location='cpu', weights_only=False)
        assert first['state_dict'].keys() == second['state_dict'].keys()
        for key, value in first['state_dict'].items():
            assert torch.equal(value, second['state_dict'][key]), (a.name, key)
        started = next(line for line in out if line.startswith(f'[{index}/2] {b.name}: started ('))
        core = cores[(index - 1) * len(cores) // 2] if len(cores) >= 2 else cores[0]
        assert f'(CPU {core}, 1 thread(s) per process)' in started, started
        assert any(line.startswith(f'[{index}/2] {b.name}: trained in ') for line in out), out
        assert any(line.startswith(f'[{index}/2] {b.name}: started -> ok in ') for line in out)
        state = read_progress(b.work_dir)
        assert state['phase'] == 'trained' and (state['epoch'], state['iter']) == (2, 16)
    assert _metrics(one.results_dir) == _metrics(two.results_dir)
    assert len(_metrics(two.results_dir)) == 2
    assert out[-2] == 'summary: 2 run(s): 2 started'
