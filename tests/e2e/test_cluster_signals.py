"""End to end: a scheduler's pre-emption signal as a cluster delivers it. SLURM's pre-emption
and scancel send SIGTERM to every process of the job at once (tools/dist_train.sh, torchrun, the
training processes, their loader workers); `kill -- -PGID` sends it to the launch's process
group (dist_train.sh and torchrun; torchrun starts each training process in a session of its
own, so the script forwards the signal). A real tiny run through tools/dist_train.sh (one
loader worker per process) signalled in the middle of an epoch saves that iteration's
checkpoint and exits 143, leaves no process behind, and `--resume` ends with the weights of
the uninterrupted run (tests/e2e/conftest.py) bit for bit. (Before, torchrun stopped the
training processes, SIGKILLing those that took longer than its grace, and the loader workers
died: exit 1, no checkpoint.)

Here the signal goes to every process of a job of two, and the resume starts the moment the job
has ended. What a delivery to the process group adds runs in the other cases: torchrun taking
the signal itself is part of this one, and the script passing it on to the training processes
(each in a session of its own) is the SIGTERM to the script alone while they start, below, and
the real SLURM's requeue (tests/e2e/test_real_slurm.py). What happens in a training process once
the signal is there (SIGTERM and SIGUSR1, mid-epoch and on an epoch's last step) runs in-process
in tests/harness/faults/test_resume_in_process.py."""
import os
import signal
import subprocess
import sys
from pathlib import Path

from benchmark.harness.faults import runs as fr
from benchmark.layout import PREEMPTED_MARKER, REPO_ROOT
from tests.e2e.conftest import (EPOCHS, INTERVAL, STEPS, alive, paused_config, process_tree,
                                run_env, tiny_config, wait_for)

# Signalled after iteration 5: mid-epoch with 4 steps per epoch (two processes), and not a
# periodic checkpoint's iteration, so iter_5.pth is the pre-emption's. The paused step
# then takes 4 s, longer than torchrun's grace (TORCH_ELASTIC_SHUTDOWN_TIMEOUT=1 below):
# torchrun acting on the signal would SIGKILL the run.
AT = 5
assert AT % INTERVAL and AT % STEPS[2]


def test_a_whole_job_sigterm_saves_exits_143_and_resumes_bit_identical(reference_2p, tmp_path,
                                                                       tiny_data):
    nproc, reference = 2, reference_2p
    work = tmp_path / 'work'
    config, flag = paused_config(tmp_path, tiny_data, AT, slow_s=4)
    env = dict(run_env(tmp_path, tmp_path), TORCH_ELASTIC_SHUTDOWN_TIMEOUT='1',
               PORT=str(fr.free_port()), PYTHON=sys.executable)
    cmd = ['bash', str(REPO_ROOT / 'tools' / 'dist_train.sh'), config, str(nproc),
           '--work-dir', str(work), '--no-eval']
    with open(tmp_path / 'killed.log', 'w') as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own process group, as a job's
        try:
            wait_for(lambda: all(os.path.exists(f'{flag}.{r}') for r in range(nproc))
                     or proc.poll() is not None, 600, f'iteration {AT}')
            tree = process_tree(proc.pid)
            # dist_train.sh, torchrun, each training process and its loader worker
            assert len(tree) == 2 + 2 * nproc, tree
            for pid in tree:
                os.kill(pid, signal.SIGTERM)
            code = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    output = (tmp_path / 'killed.log').read_text()
    assert code == 143, output[-3000:]
    assert (work / f'iter_{AT}.pth').is_file() and (work / PREEMPTED_MARKER).read_text() == f'{AT}\n'
    assert fr.referenced_corrupt(str(work)) == []
    # resumed the moment the job's exit status is known: no process of it holds the work dir
    # (a loader worker once kept its lock after the trainer's exit 143; the resume exited 75)
    resumed = fr.train(tiny_config(tmp_path / 'plain.py', tiny_data), str(work), nproc=nproc,
                       torchrun=True, resume=True, env=run_env(tmp_path), timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not any(alive(p) for p in tree), 'a process of the stopped job outlived it'

    assert f'resumed epoch: {AT // STEPS[nproc]}, iter: {AT}' in resumed.stdout + resumed.stderr
    final = fr.load_weights(fr.final_checkpoint(str(work), EPOCHS))
    assert fr.differing(reference.weights, final) == []


def test_a_sigterm_while_the_training_processes_start_is_held_until_their_first_step(
        tmp_path, tiny_data):
    """SIGTERM to tools/dist_train.sh (as a suite stops its run) while its two training
    processes are still importing: they hold it (benchmark/engine/held_signals.py), and once
    training runs they act on it at their first agreement, save, and the job exits 143.
    (Before, the default action killed them there: torchrun's failure, exit 1, nothing saved.)"""
    work = tmp_path / 'work'
    env = dict(run_env(tmp_path), PORT=str(fr.free_port()), PYTHON=sys.executable)
    # As a user's shell has it: without OMP_NUM_THREADS, the launcher's torch starts its thread
    # pool while it checks the config, and those threads must not take the signal either
    # (torchrun gives each training process one thread itself).
    env.pop('OMP_NUM_THREADS', None)
    cmd = ['bash', str(REPO_ROOT / 'tools' / 'dist_train.sh'),
           tiny_config(tmp_path / 'tiny.py', tiny_data), '2', '--work-dir', str(work), '--no-eval']

    def trainers() -> list:  # torchrun's children: python [-u] .../tools/train.py ...
        found = []
        for pid in process_tree(proc.pid):
            try:
                args = Path(f'/proc/{pid}/cmdline').read_bytes().split(b'\0')
            except OSError:
                continue
            if any(a.endswith(b'tools/train.py') for a in args[1:3]) and b'--launcher' in args:
                found.append(pid)
        return found

    with open(tmp_path / 'stopped.log', 'w') as log:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            wait_for(lambda: len(trainers()) == 2, 300, 'the training processes to start', proc)
            assert not list(work.glob('*.pth'))  # they are importing: no step yet
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    output = (tmp_path / 'stopped.log').read_text()
    assert code == 143, output[-3000:]
    done = int((work / PREEMPTED_MARKER).read_text())
    assert 1 <= done < EPOCHS * STEPS[2], done
    assert 'SIGTERM: saved ' in output and f'after iteration {done}; exiting with 143' in output
    assert fr.referenced_corrupt(str(work)) == []
