"""SIGTERM / SIGUSR1: finish the step, save a checkpoint, exit 143 so the scheduler requeues.

The signal may come to the trainer alone or, as a scheduler sends it, to every process of the
job at once: the loader workers then leave it to the trainer (`benchmark.data.worker_signals`),
and `tools/dist_train.sh` keeps torchrun from acting on it.
"""
import os
import os.path as osp
import signal
import sys
from typing import Optional, Tuple

from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from benchmark import dist
from benchmark.data.worker_signals import protect_loader_workers, stop_workers
from benchmark.engine.checkpoint_hook import SafeCheckpointHook
from benchmark.engine import held_signals
from benchmark.engine.deferred_log import logger_interval, reads_logs
from benchmark.layout import PREEMPTED_MARKER
from benchmark.exit_codes import PREEMPTED_EXIT_CODE

# Set by tools/dist_train.sh: a file where a process writes the exit code its job should end
# with, and its error line; torchrun ends a job whose processes failed with 1, whatever their
# codes.
EXIT_CODE_FILE_ENV = 'TRAIN_EXIT_CODE_FILE'


def tell_launcher(code: int, line: str = '') -> None:
    """Ask tools/dist_train.sh of this machine to exit with ``code``, printing ``line`` last
    (torchrun's report goes to a log); nothing happens outside that script.

    A code every process reaches together (a pre-emption) is written by local rank 0; a line
    is written by the process that has it, whatever its rank (an error only it met). The first
    one written stays: a process that fails because another one did cannot replace its line.
    """
    path = os.environ.get(EXIT_CODE_FILE_ENV)
    if not path or not (line or dist.local_rank() == 0):
        return
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(handle, 'w') as told:  # read once every process has ended
        told.write(f'{code}\n' + (f'{line}\n' if line else ''))


def read_told() -> Optional[Tuple[int, str]]:
    """(code, line) a process told with `tell_launcher`, removing the file; None if none did."""
    path = os.environ.get(EXIT_CODE_FILE_ENV)
    if not path:
        return None
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
        os.remove(path)
    except OSError:
        return None
    try:
        return int(lines[0]), (lines[1] if len(lines) > 1 else '')
    except (IndexError, ValueError):
        return None


def launcher_told() -> bool:
    """Some process of this machine has told tools/dist_train.sh how the job ends."""
    path = os.environ.get(EXIT_CODE_FILE_ENV)
    return bool(path) and osp.exists(path)


@HOOKS.register_module()
class PreemptionHook(Hook):
    """Turn SIGTERM/SIGUSR1 into "finish this step, checkpoint, exit 143" on every process.

    The handler only sets a flag; after each iteration (in a distributed run: after each
    logging interval's last iteration, and at each epoch's end) all processes agree on it (one
    tiny all-reduce), save `iter_<n>.pth` through `SafeCheckpointHook`, write the `preempted`
    marker and exit with code 143. Resume with `--resume`. One process reads a flag, which
    costs nothing; the agreement of several is a collective whose result the host must wait
    for, which every iteration would stop the host from running ahead of the device. A signal
    is therefore acted on within one logging interval.

    Args:
        signals: Signal names to handle.
    """

    priority = 'LOWEST'  # after the iteration's own checkpoint and logging

    def __init__(self, signals=('SIGTERM', 'SIGUSR1')) -> None:
        if isinstance(signals, str) or not signals:
            raise ValueError(f"signals must be a list of signal names such as ['SIGTERM'], "
                             f'got {signals!r}')
        for name in signals:
            if name not in signal.Signals.__members__:
                raise ValueError(f"signals: unknown signal {name!r}; valid: "
                                 f"{', '.join(map(repr, signal.Signals.__members__))}")
        self.signals = tuple(signals)
        self.received = None
        self._every = 1  # iterations between agreements of a distributed run
        self._previous = {}  # the handlers before the training, put back after it

    def _handle(self, signum, frame) -> None:  # noqa: ARG002
        self.received = signal.Signals(signum).name

    def before_train(self, runner) -> None:
        self._every = logger_interval(runner) or 1
        self._previous = {name: signal.signal(getattr(signal, name), self._handle)
                          for name in self.signals}
        # one that came while the process started (held_signals): acted on after the first step
        self.received = self.received or held_signals.take()
        protect_loader_workers(runner.train_dataloader)  # before its workers start
        marker = osp.join(runner.work_dir, PREEMPTED_MARKER)
        if osp.exists(marker) and dist.is_main():
            os.remove(marker)

    def after_run(self, runner) -> None:
        """The handlers from before the training back (a tool that goes on has its own)."""
        for name, handler in self._previous.items():
            if handler is not None:  # None: one set outside Python, which cannot be put back
                signal.signal(getattr(signal, name), handler)
        self._previous = {}

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if dist.distributed() and not reads_logs(runner, batch_idx, self._every):
            return
        if not dist.any_process(self.received is not None):
            return
        if (runner.iter + 1) % len(runner.train_dataloader) == 0:
            return  # the epoch's last step: its end-of-epoch work runs first (after_train_epoch)
        saver = next(h for h in runner.hooks if isinstance(h, SafeCheckpointHook))
        self._exit(runner, saver.save_iteration(runner), runner.iter + 1)

    def after_train_epoch(self, runner) -> None:
        if not dist.any_process(self.received is not None):
            return
        saver = next(h for h in runner.hooks if isinstance(h, SafeCheckpointHook))
        # epoch_<n>.pth (again if the epoch saved it); the loop has counted the epoch's last step
        self._exit(runner, saver.save_epoch(runner), runner.iter)

    def _exit(self, runner, path: str, done: int) -> None:
        """Say what was saved after iteration ``done``, mark the work dir, end the loader
        workers, exit 143."""
        runner.logger.warning(
            f'{self.received or "signal on another process"}: saved {path} after iteration '
            f'{done}; exiting with {PREEMPTED_EXIT_CODE} (resume with --resume)')
        if dist.is_main():
            with open(osp.join(runner.work_dir, PREEMPTED_MARKER), 'w') as handle:
                handle.write(f'{done}\n')
        tell_launcher(PREEMPTED_EXIT_CODE)
        dist.barrier()
        killed = stop_workers()  # exit means free: nothing of this process outlives it
        if killed:
            runner.logger.warning(f'loader workers {killed} did not stop in time: killed')
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(PREEMPTED_EXIT_CODE)  # no teardown that could hang on a half-gone job
