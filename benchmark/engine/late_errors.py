"""How a training process ends on an error found after its start: one line, and its code told to
`tools/dist_train.sh` (`benchmark.engine.preemption.tell_launcher`; torchrun would end the
job with 1, whatever the process's code).

- `start_exit`: the run could not start (`START_ERRORS`): `busy_exit` or `bad_input`;
- `bad_input`: what the process found while it built the run (a ``--resume`` checkpoint that
  does not fit, a data folder, no GPU of its own): `benchmark.cli.fail`'s line, exit code 2;
- `busy_exit`: its work dir held by another process (exit 75);
- `late_exit`, for what its training raised: a divergence (its line, recorded where the run
  records, exit 3); a full disk (the line after wandb's last words,
  exit 74); an image file that broke after the scan, met by this process alone (its line, said
  by this process whatever its rank, exit 2); an error that follows from another process's end,
  once that one told its line (a collective it broke: nothing more, exit 1). Anything else
  keeps its traceback.
"""
import contextlib
import sys
from typing import Callable, Optional

from benchmark import dist
from benchmark.atomic_io import no_space_left
from benchmark.cli import config_line, fail, one_line
from benchmark.data.base import DataRootError
from benchmark.engine.checkpoint_hook import DiskFullError, full_disk_line
from benchmark.engine.nan_guard import DivergedError
from benchmark.engine.preemption import launcher_told, tell_launcher
from benchmark.engine.work_dir_lock import WorkDirBusy
from benchmark.exit_codes import (BAD_INPUT_EXIT_CODE, DISK_FULL_EXIT_CODE, DIVERGED_EXIT_CODE,
                                  WORK_DIR_BUSY_EXIT_CODE)

# What building a run raises where it cannot start (mmengine refuses some configs by assert).
START_ERRORS = (WorkDirBusy, ValueError, OSError, TypeError, KeyError, AssertionError)


def start_exit(err: BaseException, config: str, debug: bool = False) -> int:
    """The exit code of a run that could not start (`START_ERRORS`), once it said why: its work
    dir held (`busy_exit`), else bad input (`bad_input`, led by `config`); `err` with --debug."""
    if isinstance(err, WorkDirBusy):
        return busy_exit(err)
    if debug:
        raise err
    return bad_input(config_line(config, err))


def bad_input(message: str) -> int:
    """``error: message`` (rank 0 says it), told to the launcher by any process; exit code 2."""
    tell_launcher(BAD_INPUT_EXIT_CODE, f'error: {message}')
    return fail(message)


def busy_exit(err: BaseException) -> int:
    """Rank 0 found its work dir held (after dist_train.sh's check, only if it lost a race)."""
    fail(str(err))
    tell_launcher(WORK_DIR_BUSY_EXIT_CODE, f'error: {err}')
    return WORK_DIR_BUSY_EXIT_CODE


def late_exit(runner, err: BaseException, config: str,
              record: Optional[Callable[[str], str]] = None) -> Optional[int]:
    """The exit code of a process whose training raised `err`, once it has said it (see the
    module); None for any other error, which the caller raises again. `record`: writes a
    diverged run's record (rank 0), given the line; its path is logged."""
    if isinstance(err, DivergedError):
        runner.logger.error(str(err))
        if record is not None and dist.is_main():
            runner.logger.error(f'diverged run recorded: {record(str(err))}')
        if not err.elsewhere:  # the process that met it says it (torchrun would end with 1)
            tell_launcher(DIVERGED_EXIT_CODE, f'error: {err}')
        dist.leave_together()
        return DIVERGED_EXIT_CODE
    if isinstance(err, OSError) and no_space_left(err):
        line = full_disk_line(err)
        runner.logger.error(line)
        with contextlib.suppress(Exception):  # wandb says its last words before that line
            runner.visualizer.close()
        fail(line)
        tell_launcher(DISK_FULL_EXIT_CODE, f'error: {line}')
        if isinstance(err, DiskFullError):  # every process has it (a checkpoint's)
            dist.leave_together()
        return DISK_FULL_EXIT_CODE
    if isinstance(err, DataRootError):  # BadImageError: one file, met by this process alone
        line = f'error: {config}: {one_line(err)}'
        print(line, file=sys.stderr, flush=True)
        tell_launcher(BAD_INPUT_EXIT_CODE, line)
        return BAD_INPUT_EXIT_CODE
    if launcher_told():  # another process said how the job ends: this follows from it
        return 1
    return None
