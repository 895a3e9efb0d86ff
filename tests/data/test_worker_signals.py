"""Loader workers and pre-emption signals: a real DataLoader worker ignores SIGTERM and SIGUSR1
sent by another process (a scheduler signalling the whole job) and keeps serving batches, still
ends on a SIGTERM from its trainer, and runs the loader's own worker_init_fn; without the
wrapper, torch's worker dies of the same SIGTERM and the next batch fails. The trainer's
pre-emption exit ends and joins them at once (`stop_workers`)."""
import os
import signal
import subprocess

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from benchmark.data.worker_signals import WorkerSignals, protect_loader_workers

SEEDED = {}


class WorkerPids(Dataset):
    """Each item: the pid of the worker that made it, and whether the loader's own init ran."""

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int):
        return torch.tensor([os.getpid(), SEEDED.get('worker', -1)])


def own_init(worker_id: int) -> None:  # stands in for mmengine's seeding
    SEEDED['worker'] = worker_id


def send_from_another_process(sig: signal.Signals, pid: int) -> None:
    subprocess.run(['kill', f'-{sig.name[3:]}', str(pid)], check=True)


PROTECTED = """
import os, signal
from torch.utils.data import DataLoader
from benchmark.data.worker_signals import protect_loader_workers
from tests.data.test_worker_signals import WorkerPids, own_init, send_from_another_process
loader = DataLoader(WorkerPids(), batch_size=1, num_workers=1, worker_init_fn=own_init)
protect_loader_workers(loader)
it = iter(loader)
pid, seeded = next(it)[0].tolist()
served = []
for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGTERM):
    send_from_another_process(sig, pid)
    served += [next(it)[0, 0].item() for _ in range(3)]
worker = it._workers[0]
os.kill(pid, signal.SIGTERM)  # from its parent: torch's way of ending a worker
worker.join(timeout=60)
print(pid != os.getpid(), seeded, set(served) == {pid}, worker.exitcode)
"""


def test_a_worker_ignores_signals_from_other_processes_and_ends_on_its_trainers(subprocess_env):
    """In a process of its own: a trainer that has run other code may have threads that
    libraries restart in every forked child (OpenTelemetry's exporters do), which would make
    the worker take its threaded path; a trainer's first loader has none."""
    import sys
    proc = subprocess.run([sys.executable, '-c', PROTECTED], env=subprocess_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # a worker; the loader's own init ran in it; the same worker served every batch after the
    # foreign signals; it ended (exit 0) on its trainer's SIGTERM
    assert proc.stdout.split() == ['True', '0', 'True', '0']


CONTROL = """
import signal
from torch.utils.data import DataLoader
from tests.data.test_worker_signals import WorkerPids, send_from_another_process
it = iter(DataLoader(WorkerPids(), batch_size=1, num_workers=1))
pid = next(it)[0, 0].item()
signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # torch's handler would raise anywhere
send_from_another_process(signal.SIGTERM, pid)
it._workers[0].join(timeout=60)
print(it._workers[0].exitcode)
"""


@pytest.mark.slow
def test_without_it_torchs_worker_dies_of_a_foreign_sigterm(subprocess_env):
    """The control (in a process of its own): what a whole-job SIGTERM did to a worker before,
    after which its trainer failed at the next batch."""
    import sys
    proc = subprocess.run([sys.executable, '-c', CONTROL], env=subprocess_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(-signal.SIGTERM)]


def test_the_wrapper_pickles_for_spawned_workers_and_runs_without_an_inner_init():
    import pickle
    wrapped = pickle.loads(pickle.dumps(WorkerSignals(own_init)))
    assert wrapped.inner is own_init
    assert get_worker_info() is None
    loader = DataLoader(WorkerPids(), batch_size=2, num_workers=1)
    protect_loader_workers(loader)
    assert isinstance(loader.worker_init_fn, WorkerSignals) and loader.worker_init_fn.inner is None
    assert len(list(loader)) == 500


THREADED = """
import os, signal, threading, time
from benchmark.data.worker_signals import leave_signals_to_trainer
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()  # a thread that runs before the init,
leave_signals_to_trainer()                               # as in a spawned or forkserver worker
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.5)
print('alive')
"""


@pytest.mark.slow
def test_a_worker_with_other_threads_ignores_the_signals_outright(subprocess_env):
    """Spawn and forkserver workers run threads before the worker's init: a blocked mask would
    leave those threads to die of the signal, so the signals are ignored process-wide."""
    import sys
    proc = subprocess.run([sys.executable, '-c', THREADED], env=subprocess_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.split() == ['alive']


STOPPED = """
import os, signal, time
from torch.utils.data import DataLoader
from benchmark.data.worker_signals import protect_loader_workers, stop_workers
from tests.data.test_worker_signals import WorkerPids
loader = DataLoader(WorkerPids(), batch_size=1, num_workers=2, persistent_workers=True)
protect_loader_workers(loader)
it = iter(loader)
pids = sorted({next(it)[0, 0].item() for _ in range(8)})
killed = stop_workers(timeout_s=5.0)
alive = [p for p in pids if os.path.exists(f'/proc/{p}') and
         open(f'/proc/{p}/stat').read().split(')')[1].split()[0] != 'Z']
print(len(pids), killed, alive)
"""


def test_stop_workers_ends_and_joins_the_loader_workers_at_once(subprocess_env):
    """What the pre-emption exit calls before os._exit: the protected workers take their
    trainer's SIGTERM, are joined, and nothing of them is left (no process, no zombie)."""
    import sys
    proc = subprocess.run([sys.executable, '-c', STOPPED], env=subprocess_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ['2', '[]', '[]']  # none had to be killed


STUBBORN = """
import multiprocessing, signal, time
from benchmark.data.worker_signals import stop_workers
def stubborn():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)
child = multiprocessing.get_context('fork').Process(target=stubborn, daemon=True)
child.start()
time.sleep(0.5)
print(stop_workers(timeout_s=0.5) == [child.pid], child.is_alive())
"""


def test_a_worker_that_does_not_stop_is_killed_after_the_timeout(subprocess_env):
    import sys
    proc = subprocess.run([sys.executable, '-c', STUBBORN], env=subprocess_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ['True', 'False']
