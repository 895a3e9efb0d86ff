"""A run over two nodes, one SLURM task per process (`slurm.nodes`): four task processes on this
machine, each given the environment SLURM gives a task of a two-node job with two tasks per node
(SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, ...), each running the suite's task of one rank.
The task of rank 0 hosts the rendezvous on a port the kernel chose and says where in the work
dir; the four gloo ranks train the tiny config together and rank 0 alone evaluates."""
import json
import os
import pickle
import subprocess
import sys

from benchmark.suites.slurm_ranks import RENDEZVOUS_FILE
from benchmark.suites.slurm_task import RunTask, Step
from tests.conftest import ROOT
from tests.e2e.conftest import EPOCHS, run_env, tiny_config

RUN = ('import pickle, sys\ntask = pickle.load(open(sys.argv[1], "rb"))\n'
       'print("result", task(), flush=True)\n')


def test_two_nodes_of_two_tasks_train_one_run_with_the_ranks_slurm_gives(tmp_path, tiny_data):
    config = tiny_config(tmp_path / 'tiny.py', tiny_data)
    work = tmp_path / 'work'
    cmd = [sys.executable, '-u', str(ROOT / 'tools/train.py'), config, '--launcher', 'pytorch',
           '--work-dir', str(work), '--results-dir', str(work / 'results')]
    task = RunTask('r', Step('train', cmd, str(work / 'suite_train.log')),
                   [Step('knn', ['bash', '-c', 'echo evaluated'], str(work / 'eval.log'))],
                   sys.executable, ranks_in=str(work))
    (tmp_path / 'task.pkl').write_bytes(pickle.dumps(task))
    (tmp_path / 'run.py').write_text(RUN)
    procs = []
    for rank in range(4):
        env = dict(run_env(tmp_path), SUBMITIT_EXECUTOR='slurm', SLURM_JOB_ID='4242',
                   SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank % 2), SLURM_NTASKS='4',
                   SLURM_JOB_NUM_NODES='2', SLURM_NODEID=str(rank // 2),
                   SLURM_JOB_NODELIST='localhost')
        procs.append(subprocess.Popen([sys.executable, str(tmp_path / 'run.py'),
                                       str(tmp_path / 'task.pkl')], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [proc.communicate(timeout=600)[0] for proc in procs]
    logs = {rank: (work / ('suite_train.log' + (f'.rank{rank}' if rank else ''))).read_text()
            for rank in range(4)}
    assert [proc.returncode for proc in procs] == [0] * 4, (outs, logs[0][-3000:])
    where = json.loads((work / RENDEZVOUS_FILE).read_text())
    assert where['attempt'] == '4242.0' and where['addr'] == 'localhost' and where['port'] > 0
    assert (work / f'epoch_{EPOCHS}.pth').is_file()
    records = list((work / 'results/runs').glob('*.json'))
    assert len(records) == 1  # the training's rank 0 alone records
    record = json.loads(records[0].read_text())
    assert (record['world_size'], record['total_batch']) == (4, 16)
    # rank 0's task evaluates, and no other
    assert (work / 'eval.log').read_text().splitlines().count('evaluated') == 1
    assert all(f"'run': 'r'" in out for out in outs)
