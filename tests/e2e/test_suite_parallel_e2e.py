"""End to end: a real two-run suite on digits (tiny sizes) run with --parallel 2 ends with the
final weights of the same suite run one run at a time (tests/e2e/conftest.py's `digits_suite`,
whose second run was killed and resumed) bit for bit, and records the same metrics; the parallel
runs each had their own CPU core and wrote progress.json, and the suite showed them training
and trained."""
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

import benchmark.components  # noqa: F401
from benchmark.engine.progress import read_progress
from benchmark.harness.faults.runs import tiny_env
from benchmark.suites.spec import expand_suite
from tests.conftest import ROOT


def _metrics(results_dir):
    records = [json.loads(p.read_text()) for p in Path(results_dir, 'runs').glob('*.json')]
    return {(r['method'], r['seed']): {name: entry['metrics']
                                       for name, entry in r['protocols'].items()}
            for r in records}


def test_parallel_runs_equal_one_at_a_time(digits_suite, tmp_path):
    suite = str(digits_suite.folder / 'tiny.py')
    roots = ['--results-root', str(tmp_path / 'results'), '--work-root', str(tmp_path / 'work_dirs')]
    env = dict(tiny_env(), PYTHON=sys.executable)  # OMP_NUM_THREADS=1 in both layouts
    done = subprocess.run([sys.executable, str(ROOT / 'tools/run_suite.py'), suite, '--no-wandb',
                           *roots, '--parallel', '2'],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout.splitlines()
    two = expand_suite(suite, results_root=roots[1], work_root=roots[3])
    assert out[0].endswith(f"2 runs at a time; records in {two.results_dir}/runs")
    cores = sorted(os.sched_getaffinity(0))
    for index, (a, b) in enumerate(zip(digits_suite.runs, two.runs), 1):
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
    one = digits_suite.folder / 'results/suites/tiny'
    assert _metrics(one) == _metrics(two.results_dir)
    assert len(_metrics(two.results_dir)) == 2
    assert out[-2] == 'summary: 2 run(s): 2 started'
