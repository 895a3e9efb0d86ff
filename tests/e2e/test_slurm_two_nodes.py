"""One run across two real SLURM nodes (tools/slurm_cluster.sh up cgroup 2: a controller and two
slurmd on this machine, each with its own node name and port, over loopback; marked `slurm`,
skipped saying why when none answers). A suite with ``slurm.nodes=2`` and two processes runs
one SLURM task per process through srun, one on each node, their ranks, master address and port
from SLURM; pre-empted in the middle (``scontrol requeue``: SIGTERM to both tasks), it saves,
is requeued, resumes and ends with the weights of the two-process torchrun run bit for bit and
one record. Losing one node's task (its processes SIGKILLed, as when a node fails) ends the job
in bounded time and leaves no process behind."""
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from benchmark.harness.faults.runs import differing, load_weights
from tests.conftest import ROOT
from tests.e2e.conftest import (EPOCHS, STEPS, paused_config, process_tree, run_env,
                                tiny_config, wait_for)
from tests.e2e.test_real_slurm import finish, queued

pytestmark = pytest.mark.slurm

AT = 5  # epoch 2, batch 1 of 4 per process
SUITE = """
configs = [{config!r}]
seeds = [0]
procs = 2
slurm = dict(partition='debug', time='0:30:00', gpus_per_node=0, cpus_per_task=1, nodes=2,
             poll_s=1)
"""


def start(folder: Path, config: str):
    """The two-process, two-node suite of ``config``, submitted from ``folder`` and waited
    for: its name and process."""
    name = f'twonodes_{uuid.uuid4().hex[:8]}'
    suite_file = folder / f'{name}.py'
    suite_file.write_text(SUITE.format(config=config))
    env = dict(run_env(folder, folder), PYTHON=sys.executable)
    cmd = [sys.executable, str(ROOT / 'tools/run_suite.py'), str(suite_file), '--no-wandb',
           '--launcher', 'slurm', '--wait']
    return name, subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)


def tasks_of(job: str) -> dict:
    """{rank: (node name, pid)} of the job's SLURM tasks (the processes srun started: their
    environment names the job, the rank and the node, and their parent is not one of them)."""
    found = {}
    for entry in Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = dict(v.split(b'=', 1) for v in (entry / 'environ').read_bytes().split(b'\0')
                       if b'=' in v)
            ppid = int((entry / 'stat').read_text().rsplit(')', 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if env.get(b'SLURM_JOB_ID') == job.encode() and b'SLURM_PROCID' in env:
            found.setdefault(int(env[b'SLURM_PROCID']), []).append(
                (ppid, int(entry.name), env.get(b'SLURMD_NODENAME', b'').decode()))
    tasks = {}
    for rank, procs in found.items():
        pids = {pid for _, pid, _ in procs}
        top = [(pid, node) for ppid, pid, node in procs if ppid not in pids]
        tasks[rank] = (top[0][1], top[0][0])
    return tasks


def test_one_run_across_two_nodes_is_requeued_and_resumes_bit_identical(
        real_slurm_two_nodes, tmp_path, tiny_data, reference_2p):
    config, flag = paused_config(tmp_path, tiny_data, AT)
    name, proc = start(tmp_path, config)
    try:
        wait_for(lambda: all(os.path.exists(f'{flag}.{r}') for r in (0, 1)), 900,
                 f'iteration {AT} on both ranks', proc)
        (job,) = queued(name)
        placed = tasks_of(job)
        assert sorted(placed) == [0, 1] and len({node for node, _ in placed.values()}) == 2, \
            placed  # one task on each node
        subprocess.run(['scontrol', 'requeue', job], check=True, timeout=30)
    except BaseException:
        finish(name, proc)
        raise
    out = finish(name, proc)
    assert proc.returncode == 0, out[-3000:]
    work = next((tmp_path / f'work_dirs/suites/{name}').glob('paused-*'))
    log = (work / 'suite_train.log').read_text()
    assert log.count('\n==== ') == 2 and 'exiting with 143' in log, log[-3000:]
    assert f'resumed epoch: {AT // STEPS[2]}, iter: {AT}' in log, log[-3000:]
    assert (work / 'suite_train.log.rank1').read_text().count('\n==== ') == 2
    # as PreemptMode=REQUEUE does: SLURM sends SIGTERM to the tasks only, which pass it on
    job_logs = ''.join(p.read_text() for p in (work.parent / 'submitit').glob('*/*_log.*'))
    assert 'requeued by SLURM; it resumes when SLURM starts it again' in job_logs, job_logs[-3000:]
    assert len(list((tmp_path / f'results/suites/{name}/runs').glob('*.json'))) == 1
    assert differing(reference_2p.weights, load_weights(str(work / f'epoch_{EPOCHS}.pth'))) == []


SLOW = """
import time
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class SlowAfterHook(Hook):
    def __init__(self, at_iter, flag):
        self.at_iter, self.flag = at_iter, flag

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if runner.iter + 1 >= self.at_iter:
            open(self.flag, 'w').close()
            time.sleep(1.0)
"""


def test_losing_one_nodes_task_ends_the_job_in_bounded_time_without_orphans(
        real_slurm_two_nodes, tmp_path, tiny_data):
    (tmp_path / 'slow_after.py').write_text(SLOW)
    flag = tmp_path / 'slowing'
    config = tiny_config(tmp_path / 'slow.py', tiny_data, imports=['slow_after'],
                         hooks=[f"dict(type='SlowAfterHook', at_iter=2, flag={str(flag)!r})"])
    name, proc = start(tmp_path, config)
    try:
        wait_for(flag.exists, 900, 'iteration 2', proc)
        (job,) = queued(name)
        node, task = tasks_of(job)[1]
        lost = process_tree(task)  # the node's task and everything under it, at once
        for pid in lost:
            os.kill(pid, signal.SIGKILL)
        # bounded: without srun ending the step the job would wait for gloo's timeout (30 min)
        wait_for(lambda: not queued(name), 180, 'the job leaving the queue', proc)
    finally:
        out = finish(name, proc)
    assert proc.returncode != 0 and '-> failed: ' in out, out[-3000:]  # it ended, saying so
    work = next((tmp_path / f'work_dirs/suites/{name}').glob('slow-*'))
    left = subprocess.run(['pgrep', '-f', str(work)], capture_output=True, text=True).stdout.split()
    assert left == [], (left, node)
    assert not list((tmp_path / f'results/suites/{name}/runs').glob('*.json'))
