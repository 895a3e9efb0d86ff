"""Stops at random moments, each followed at once by a resume that must work.

A scenario sends one signal (SIGTERM, SIGINT, SIGUSR1, SIGKILL) to one part of a running job
(its rank-0 trainer, one of that trainer's loader workers, the launcher tools/dist_train.sh,
or the whole process group, as a scheduler's pre-emption, ``scancel`` or ``kill -- -PGID``
do), one or two processes, after a random iteration. The instant the job's exit status is
known, ``--resume`` starts, with no sleep: it must train on (waiting a bounded time for a
holder of the work dir that is still going, and saying so), end with the weights of an
uninterrupted run bit for bit, leave one record and leave no process of either job behind.
A signal the job does not stop for (SIGTERM to a loader worker, which leaves it to its
trainer) lets it finish; the resume then finds it done.
"""
from __future__ import annotations

import dataclasses
import glob
import itertools
import os
import os.path as osp
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from benchmark.harness.faults.runs import (Scorecard, differing, final_checkpoint, load_weights,
                                           referenced_corrupt, remove_checkpoints, tiny_env,
                                           train, write_config)
from benchmark.layout import REPO_ROOT

SIGNALS = ('SIGTERM', 'SIGINT', 'SIGUSR1', 'SIGKILL')
TARGETS = ('trainer', 'worker', 'launcher', 'group')
LOGGED = re.compile(r'Epoch\(train\)\s+\[\s*(\d+)\]\[\s*(\d+)/(\d+)\]')


@dataclasses.dataclass(frozen=True)
class Stop:
    """One scenario: ``signal`` to ``target`` of a job of ``nproc`` processes."""
    signal: str
    target: str
    nproc: int = 1

    @property
    def launched(self) -> bool:
        """Run through tools/dist_train.sh (torchrun), not tools/train.py alone."""
        return self.nproc > 1 or self.target == 'launcher'

    @property
    def name(self) -> str:
        return f'{self.signal.lower()}-{self.target}-{self.nproc}p'


def scenarios(nprocs: Sequence[int] = (1, 2)) -> List[Stop]:
    """Every signal to every target, for each process count."""
    return [Stop(s, t, n) for n, t, s in itertools.product(nprocs, TARGETS, SIGNALS)]


def logged_iteration(work: str) -> int:
    """The last training iteration (counted from 1 over epochs) the job's logs show; 0 if none."""
    done = 0
    for path in glob.glob(osp.join(work, '*', '*.log')):
        for epoch, batch, per in LOGGED.findall(Path(path).read_text(errors='replace')):
            done = max(done, (int(epoch) - 1) * int(per) + int(batch))
    return done


def _environ(pid: int) -> List[bytes]:
    try:
        return Path(f'/proc/{pid}/environ').read_bytes().split(b'\0')
    except OSError:
        return []


def _ppid(pid: int) -> Optional[int]:
    try:
        return int(Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def processes_of(work: str) -> List[int]:
    """Live processes whose command line names ``work`` (trainers, their workers, launchers)."""
    out = subprocess.run(['pgrep', '-f', work], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


def trainer_pid(work: str, rank: int = 0) -> Optional[int]:
    """The training process of ``rank`` (RANK in its environment; its loader workers, forked
    with the same environment, are told apart by their parent)."""
    ranked = [p for p in processes_of(work) if f'RANK={rank}'.encode() in _environ(p)
              and any(v.startswith(b'LOCAL_RANK=') for v in _environ(p))]
    return next((p for p in ranked if _ppid(p) not in ranked), None)


def children(pid: int) -> List[int]:
    out = subprocess.run(['pgrep', '-P', str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def start(stop: Stop, config: str, work: str, out: str) -> subprocess.Popen:
    """Start the job in a session (a process group) of its own, output to ``out``."""
    args = [config, '--work-dir', work, '--results-dir', osp.join(work, 'results')]
    env = tiny_env(work)
    if stop.launched:
        env.update(PYTHON=sys.executable)
        cmd = ['bash', str(REPO_ROOT / 'tools' / 'dist_train.sh'), args[0], str(stop.nproc),
               *args[1:]]
    else:
        cmd = [sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), *args]
    with open(out, 'w') as handle:
        return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_interruptible)


def _interruptible() -> None:  # pragma: no cover - runs in the child before exec
    """SIGINT's default action: a campaign started in the background of a shell without job
    control inherits SIGINT ignored, and the SIGINT scenarios would stop nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def send(stop: Stop, proc: subprocess.Popen, work: str, rng: random.Random) -> str:
    """Send the scenario's signal; what it was sent to (one line)."""
    sig = getattr(signal, stop.signal)
    if stop.target == 'group':
        os.killpg(proc.pid, sig)
        return f'process group {proc.pid}'
    if stop.target == 'launcher':
        proc.send_signal(sig)
        return f'tools/dist_train.sh (pid {proc.pid})'
    trainer = trainer_pid(work) if stop.launched else proc.pid
    if trainer is None:
        return 'nothing: no trainer found'
    if stop.target == 'trainer':
        os.kill(trainer, sig)
        return f'trainer (pid {trainer})'
    workers = children(trainer)
    if not workers:
        return f'nothing: trainer {trainer} has no loader worker'
    pid = rng.choice(workers)
    os.kill(pid, sig)
    return f'loader worker (pid {pid}) of trainer {trainer}'


@dataclasses.dataclass
class Outcome:
    """What a scenario did and found."""
    stop: Stop
    at: int = 0  # the iteration after which the signal went
    sent_to: str = ''
    stopped_rc: Optional[int] = None
    resumed_rc: Optional[int] = None
    waited: str = ''  # the resume's line saying it waited, if it did
    differing: int = -1  # tensors that differ from the uninterrupted run (-1: not compared)
    records: int = 0
    left: List[int] = dataclasses.field(default_factory=list)  # processes left behind
    corrupt: List[str] = dataclasses.field(default_factory=list)
    resume_s: float = 0.0

    @property
    def ok(self) -> bool:
        return (self.resumed_rc == 0 and self.differing == 0 and self.records == 1
                and not self.left and not self.corrupt and not self.sent_to.startswith('nothing'))

    def line(self) -> str:
        head = (f'{self.stop.name:<22} after iteration {self.at:>2} to {self.sent_to}: exit '
                f'{self.stopped_rc}, resume exit {self.resumed_rc} in {self.resume_s:.0f} s'
                + (', waited' if self.waited else ''))
        if self.ok:
            return f'{head}; bit-identical, 1 record'
        return (f'{head}; FAILED: {self.differing} tensors differ, {self.records} records, '
                f'left behind {self.left}, corrupt {self.corrupt}')


def run_stop(stop: Stop, tmp: str, data_root: str, reference: str, rng: random.Random,
             epochs: int = 2, per_epoch: int = 8, timeout: float = 600, **config) -> Outcome:
    """One scenario (``reference``: the final checkpoint of the same config uninterrupted;
    ``per_epoch``: iterations per epoch of one process)."""
    outcome = Outcome(stop)
    work = osp.join(tmp, f'stop-{stop.name}')
    cfg = write_config(osp.join(tmp, f'stop-{stop.name}.py'), 'mixco', data_root,
                       epochs=epochs, **config)
    total = epochs * per_epoch // stop.nproc
    outcome.at = rng.randint(1, total - 1)
    proc = start(stop, cfg, work, osp.join(tmp, f'stop-{stop.name}.out'))
    deadline = time.monotonic() + timeout
    while (proc.poll() is None and time.monotonic() < deadline
           and logged_iteration(work) < outcome.at):
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 0.3))  # anywhere within the next iteration
    outcome.sent_to = send(stop, proc, work, rng) if proc.poll() is None else 'nothing: it ended'
    try:
        outcome.stopped_rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        outcome.stopped_rc = proc.wait()
    began = time.monotonic()  # at once: no sleep between the exit and the resume
    resumed = train(cfg, work, nproc=stop.nproc, resume=True, no_eval=False,
                    torchrun=stop.launched, timeout=timeout)
    outcome.resume_s = time.monotonic() - began
    Path(tmp, f'stop-{stop.name}-resume.out').write_text(resumed.stdout + resumed.stderr)
    outcome.resumed_rc = resumed.returncode
    outcome.waited = next((line for line in resumed.stderr.splitlines()
                           if 'waiting up to' in line), '')
    final = final_checkpoint(work, epochs)
    if resumed.returncode == 0 and osp.isfile(final):
        outcome.differing = len(differing(load_weights(reference), load_weights(final)))
    outcome.records = len(glob.glob(osp.join(work, 'results', 'runs', '*.json')))
    outcome.corrupt = referenced_corrupt(work)
    for _ in range(50):  # a SIGKILLed trainer's workers go within torch's watchdog period
        outcome.left = processes_of(work)
        if not outcome.left:
            break
        time.sleep(0.2)
    for pid in outcome.left:
        os.kill(pid, signal.SIGKILL)
    remove_checkpoints(work)
    return outcome


def reference_run(tmp: str, data_root: str, nproc: int, epochs: int = 2, **config) -> str:
    """The uninterrupted run of the scenarios' config; its final checkpoint."""
    work = osp.join(tmp, f'stop-reference-{nproc}p')
    cfg = write_config(f'{work}.py', 'mixco', data_root, epochs=epochs, **config)
    done = train(cfg, work, nproc=nproc)
    if done.returncode != 0:
        raise RuntimeError(f'the {nproc}-process reference run failed: {done.stderr[-500:]}')
    return final_checkpoint(work, epochs)


def section_stops(card: Scorecard, tmp: str, data_root: str, rng: random.Random,
                  stops: Optional[Sequence[Stop]] = None, log: Callable[[str], None] = print,
                  **config) -> List[Outcome]:
    """Every scenario (or ``stops``), each scored; the outcomes."""
    stops = list(stops or scenarios())
    references = {n: reference_run(tmp, data_root, n, **config)
                  for n in sorted({s.nproc for s in stops})}
    outcomes = []
    for stop in stops:
        outcome = run_stop(stop, tmp, data_root, references[stop.nproc], rng, **config)
        card.fault(outcome.ok, f'stop {outcome.line()}')
        log(f'  {outcome.line()}')
        outcomes.append(outcome)
    return outcomes
