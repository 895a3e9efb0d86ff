"""torchrun as `tools/dist_train.sh` runs it, in the process that checked the config: the data
checked first, torchrun's own lines in a log, and the job's end as one line and one code.

`check_launch` is `tools/train.py --check-only` (the config, the work dir free) and the data
check train.py runs before it builds anything (the root, its layout, every image file:
`benchmark.engine.launch.check_data`), on one load of the config, once before any training
process starts, with train.py's line and exit code. Its scan of the image files is
cached in the data root (`benchmark.data.scan`), so each training process then only reads the
cache and stats its files. A data root where no cache can be kept (read-only, without one) gets
its layout checked here and its files decoded by each training process, as one process does,
not once more here (a bad file then ends the job with its line and exit 2 all the same).

`TorchrunJob` runs torchrun with its own output (its banner, its warnings, its report of the
processes that failed) appended to ``<work dir>/torchrun.log`` (``torchrun.node<k>.log`` on
node k of several), written only when torchrun says something; the training processes still
write to the terminal. Its `end` says how the job ended, last on stderr:

- a training process that ended with an error line (bad input found late, a divergence, a full
  disk, a busy work dir, a pre-emption's code) told it through ``TRAIN_EXIT_CODE_FILE``
  (`benchmark.engine.preemption.tell_launcher`): that line, last, and its code;
- a process that ended without one (a signal: a crash in native code, the out-of-memory
  killer; or a traceback): one line naming its rank, its signal or code, the others' ends and
  the log; exit code 1 for a signal, else its own.

`honor_shutdown_timeout` (called when the job starts) fixes one thing of torchrun's: after a
process has failed, torchrun stops the others with SIGTERM and SIGKILLs them 30 s later,
whatever ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` (or ``--shutdown-timeout``) says; with it, that
setting holds there as it does for a signal sent to torchrun.
"""
from __future__ import annotations

import os
import os.path as osp
import signal
import sys
import traceback
from typing import List, Optional, Tuple

from benchmark.cli import config_line, fail, one_line
from benchmark.engine.late_errors import START_ERRORS, start_exit
from benchmark.engine.launch import check_data, load_checked
from benchmark.engine.preemption import read_told
from benchmark.layout import SCAN_CACHE, attempt_header

LOG_NAME = 'torchrun.log'
# Why a process may die of a signal, in the words of its line.
SIGNAL_CAUSES = dict(
    SIGKILL='killed from outside, e.g. by the out-of-memory killer',
    SIGSEGV='a crash in native code', SIGBUS='a crash in native code',
    SIGILL='a crash in native code', SIGFPE='a crash in native code',
    SIGABRT='aborted by native code',
    SIGTERM='stopped from outside', SIGINT='stopped from outside',
    SIGHUP='stopped from outside', SIGQUIT='stopped from outside')


def job_log(work_dir: str) -> str:
    """Where torchrun's own lines go: ``<work dir>/torchrun.log`` (node k of several:
    ``torchrun.node<k>.log``, so that nodes sharing the work dir keep theirs apart)."""
    node = os.environ.get('NODE_RANK', '0') or '0'
    return osp.join(work_dir, LOG_NAME if node == '0' else f'torchrun.node{node}.log')


def check_launch(args) -> Tuple[int, Optional[str]]:
    """`tools/train.py --check-only` and then its data check, on one load of the config, before
    torchrun starts (`args`: its parsed arguments): (0, or train.py's exit code after its one
    line; torchrun's log, None where the config or work dir is refused).

    Raises:
        The error itself with ``--debug``.
    """
    try:
        cfg = load_checked(args)[0]
    except START_ERRORS as err:
        return start_exit(err, args.config, args.debug), None
    root = cfg.train_dataloader.dataset.get('data_root', '')
    try:  # a read-only root without a cache: a scan here would be one more, uncached
        check_data(cfg, decode_images=osp.isfile(osp.join(root, SCAN_CACHE))
                   or os.access(root or '.', os.W_OK))
    except (ValueError, OSError, TypeError, KeyError) as err:
        if args.debug:
            raise
        return fail(config_line(args.config, err)), job_log(cfg.work_dir)
    return 0, job_log(cfg.work_dir)


class LazyLog:
    """A text stream appending to `path`, opened (folders made, a header line written) at the
    first write; where it cannot be opened, `fallback` takes the text and `path` is None.
    ``fileno`` is `fallback`'s, for code that writes to a descriptor (faulthandler)."""

    def __init__(self, path: str, header: str, fallback) -> None:
        self.path, self.header, self.fallback = path, header, fallback
        self.handle = None

    def _open(self):
        if self.handle is None:
            try:
                os.makedirs(osp.dirname(self.path) or '.', exist_ok=True)
                self.handle = open(self.path, 'a', encoding='utf-8')
                self.handle.write(attempt_header(self.header))
            except OSError:
                self.handle, self.path = self.fallback, None
        return self.handle

    @property
    def written(self) -> bool:
        return self.handle is not None

    def write(self, text: str) -> int:
        self._open().write(text)
        return len(text)

    def flush(self) -> None:
        if self.handle is not None:
            self.handle.flush()

    def fileno(self) -> int:
        return self.fallback.fileno()

    def isatty(self) -> bool:
        return False

    def close(self) -> None:
        if self.handle is not None and self.handle is not self.fallback:
            self.handle.close()


def how_it_ended(failure) -> str:
    """'Signal 9 (SIGKILL)' or 'exit code 1', of torchrun's record of a process."""
    if failure.exitcode < 0:
        return f'Signal {-failure.exitcode} ({failure.signal_name()})'
    return f'exit code {failure.exitcode}'


def without_a_line(failures: dict, report: str) -> Tuple[int, str]:
    """(exit code, line) of a job whose processes ended without an error line of their own;
    `failures`: torchrun's {rank: ProcessFailure}, `report`: where its report is, in words."""
    first = min(failures, key=lambda rank: failures[rank].timestamp)
    failure = failures[first]
    if failure.exitcode < 0:
        name = failure.signal_name()
        what = (f'ended by {how_it_ended(failure)} without an error line '
                f"({SIGNAL_CAUSES.get(name, 'a signal')})")
        code = 1
    else:
        what = f'failed with {how_it_ended(failure)} without an error line (its output is above)'
        code = failure.exitcode or 1
    others = [f'rank {rank}: {how_it_ended(failures[rank])}' for rank in sorted(failures)
              if rank != first]
    then = f"; the others then ended ({', '.join(others)})" if others else ''
    return code, (f'error: training process rank {first} (pid {failure.pid}) {what}{then}; '
                  f'{report}')


SHUTDOWN_TIMEOUT = 'TORCH_ELASTIC_SHUTDOWN_TIMEOUT'  # torchrun's setting (30 s by default)


def honor_shutdown_timeout() -> None:
    """After a process has failed, torchrun stops the others with its configured shutdown
    timeout between SIGTERM and SIGKILL (``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``; the agent's
    ``--shutdown-timeout``), as it does for a signal sent to it, not with a fixed 30 s: torch
    (2.14.1 and before) passes the setting on the signal path only (pytorch/pytorch#119856).
    Its failure paths take the default instead: the process context closing itself when one of
    its processes fails (`PContext.close()`), and the agent's `_stop_workers` (open fix:
    pytorch/pytorch#192815). Idempotent."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.elastic.metrics import prof
    from torch.distributed.elastic.multiprocessing.api import PContext
    if hasattr(PContext.close, 'replaced'):
        return
    close = PContext.close

    def close_in_time(self, death_sig=None, timeout=None) -> None:
        if timeout is None:
            timeout = int(os.environ.get(SHUTDOWN_TIMEOUT, '30'))
        close(self, death_sig, timeout)

    @prof  # as torch's own: the agent's metrics time it
    def stop_workers(self, worker_group) -> None:
        self._shutdown(timeout=getattr(self, '_shutdown_timeout', 30))
    close_in_time.replaced = close  # torch's own, for the test that checks the fix
    stop_workers.replaced = LocalElasticAgent._stop_workers
    PContext.close = close_in_time
    LocalElasticAgent._stop_workers = stop_workers


class TorchrunJob:
    """Run torchrun inside ``with job:`` (its output to `log`), then ``sys.exit(job.end())``.

    Args:
        log: Where torchrun's own lines go (`job_log`).
    """

    def __init__(self, log: str) -> None:
        self.log: Optional[LazyLog] = None
        self.path = log
        self.code = 0
        self.failures: Optional[dict] = None  # torchrun's {rank: ProcessFailure} of a failed job
        self.stopped: Optional[str] = None  # the signal torchrun stopped the job for
        self.crash: Optional[str] = None  # torchrun's own error, one line

    def __enter__(self) -> 'TorchrunJob':
        honor_shutdown_timeout()
        self._stderr = sys.stderr
        self.log = LazyLog(self.path, ' '.join(sys.argv), sys.stderr)
        sys.stderr = self.log  # torch's log handler follows sys.stderr; the processes keep fd 2
        return self

    def __exit__(self, kind, err, trace) -> bool:
        from torch.distributed.elastic.multiprocessing.api import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        try:
            if isinstance(err, SystemExit):
                self.code = err.code if isinstance(err.code, int) else int(err.code is not None)
            elif isinstance(err, ChildFailedError):
                self.failures = dict(err.failures)
                self.log.write(err.format_msg() + '\n')
            elif isinstance(err, (SignalException, KeyboardInterrupt)):
                self.stopped = (signal.Signals(err.sigval).name
                                if isinstance(err, SignalException) else 'SIGINT')
                self.code = 128 + signal.Signals[self.stopped].value
                self.log.write(''.join(traceback.format_exception(kind, err, trace)))
            elif err is not None:
                self.crash, self.code = one_line(err), 1
                self.log.write(''.join(traceback.format_exception(kind, err, trace)))
        finally:
            sys.stderr = self._stderr
        return True  # `end` says it

    def told(self) -> Optional[Tuple[int, str]]:
        """(code, line) a training process told, removing the file (`preemption.read_told`)."""
        return read_told()

    def end(self) -> int:
        """Print how the job ended (nothing when it trained, or was pre-empted without a line)
        and return its exit code."""
        path = self.log.path if self.log is not None and self.log.written else None
        report = f"torchrun's report: {path}" if path else "torchrun's report is above"
        lines: List[str] = []
        told = self.told()
        if told is not None:
            self.code, line = told
            lines = [line] if line else []
        elif self.failures:
            self.code, line = without_a_line(self.failures, report)
            lines = [line]
        elif self.stopped:
            lines = [f'stopped by {self.stopped}; {report}']
        elif self.crash:
            lines = [f'error: torchrun failed: {self.crash}; {report}']
        if path and lines:
            for line in lines:
                self.log.write(line + '\n')
        if self.log is not None:
            self.log.close()
        if told is not None and lines and path:  # the process's line, kept as it said it
            lines.insert(0, f"{report} (how each process ended)")
        for line in lines:
            print(line, file=sys.stderr, flush=True)
        return self.code
