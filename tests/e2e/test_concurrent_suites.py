"""End to end: two real `tools/run_suite.py` processes started together on the same two-run
suite (the shared tiny config of tests/e2e/conftest.py, two seeds, one epoch) and roots, as two
terminals or two SLURM array tasks would: every run is trained once (one attempt in its training
log), each process passes over the run the other claimed and finds it done at the end, and the
suite ends with exactly one record per run."""
import json
import subprocess
import sys
from pathlib import Path

import benchmark.components  # noqa: F401
from benchmark.suites.spec import expand_suite
from tests.conftest import ROOT
from tests.e2e.conftest import run_env, tiny_config

SUITE = """
configs = [{config!r}]
seeds = [0, 1]
procs = 1
cfg_options = {{'train_cfg.max_epochs': 1}}
"""


def test_two_suite_processes_train_each_run_once(tmp_path, tiny_data):
    suite = tmp_path / 'tiny.py'
    suite.write_text(SUITE.format(config=tiny_config(tmp_path / 'tiny_run.py', tiny_data)))
    cmd = [sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite), '--no-wandb']
    env = dict(run_env(tmp_path), PYTHON=sys.executable)
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    try:
        outs = [proc.communicate(timeout=1500)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert [proc.returncode for proc in procs] == [0, 0], '\n\n'.join(outs)
    spec = expand_suite(str(suite), work_root=str(tmp_path / 'work_dirs'))
    for run in spec.runs:
        log = (Path(run.work_dir) / 'suite_train.log').read_text()
        assert log.count('\n==== ') == 1, (run.name, '\n\n'.join(outs))  # trained once
    records = [json.loads(p.read_text())
               for p in (tmp_path / 'results/suites/tiny/runs').glob('*.json')]
    assert sorted(r['seed'] for r in records) == [0, 1]  # one record per run
    started = sum(': started -> ok in ' in line for out in outs for line in out.splitlines())
    assert started == 2, '\n\n'.join(outs)
    for out in outs:  # each ends knowing both runs are done
        summary = next(line for line in out.splitlines() if line.startswith('summary: '))
        assert summary.startswith('summary: 2 run(s): '), out
        assert 'failed' not in summary and 'not reached' not in summary, out
    passed = [line for out in outs for line in out.splitlines()
              if 'claimed by another suite process (pid ' in line]
    assert passed and all(line.endswith(('coming back to it at the end', 'waiting for it'))
                          for line in passed), '\n\n'.join(outs)
