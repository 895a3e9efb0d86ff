"""What every tool does with its command line: checked numbers and paths, one-line errors.

A tool builds its parser with `ArgumentParser` (a bad argument is one ``error:`` line, no usage
text, exit code 2), types its options with `int_at_least`, `existing_file`, `output_file`...,
and runs its ``main`` through `run_tool`, which turns the errors bad input raises (`ValueError`
and its kin: ConfigError, CheckpointError, DataRootError, and `OSError`) into one line and exit
code 2; ``--debug`` shows the traceback instead. Only rank 0 prints, so a multi-process launch
says it once. Deliberately free of torch and mmengine: `tools/leaderboard.py` starts in a blink.
"""
import argparse
import difflib
import os
import os.path as osp
import sys
from typing import Any, Callable, Iterable, Optional, Sequence

from benchmark import dist, stop
from benchmark.exit_codes import BAD_INPUT_EXIT_CODE
# What bad input raises: ConfigError, CheckpointError, DataRootError (a FileNotFoundError),
# ValueError of a library, OSError of a file. Anything else is a bug and keeps its traceback.
INPUT_ERRORS = (ValueError, OSError)


def one_line(err: BaseException) -> str:
    """An error's message on one line (KeyError's without its quotes)."""
    text = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
    return ' '.join(str(text).split()) or type(err).__name__


def did_you_mean(name: Any, candidates: Iterable[Any], path: str = '') -> str:
    """`` (did you mean 'path.x'?)`` for the closest candidate (or one `name` starts), else ''."""
    candidates, name = sorted(map(str, candidates)), str(name)
    close = difflib.get_close_matches(name, candidates, n=1) or [  # 'Wandb' -> 'WandbVisBackend'
        c for c in candidates if name and c.lower().startswith(name.lower())][:1]
    return f" (did you mean {f'{path}.{close[0]}' if path else close[0]!r}?)" if close else ''


def config_line(config: str, err: BaseException) -> str:
    """An error's one line, led by the config file it is about unless it names it already."""
    message = one_line(err)
    return message if message.startswith(config) else f'{config}: {message}'


def fail(message: str) -> int:
    """Print ``error: message`` (rank 0 only) and return the bad-input exit code."""
    if dist.is_main():
        print(f'error: {message}', file=sys.stderr, flush=True)
    return BAD_INPUT_EXIT_CODE


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, but a bad argument is ``error: PROG: MESSAGE``, one line, exit 2."""

    def error(self, message: str) -> None:  # argparse prints the usage text first; we do not
        fail(f'{self.prog}: {" ".join(message.split())}')
        self.exit(BAD_INPUT_EXIT_CODE)


def run_tool(main: Callable[[Optional[Sequence[str]]], int],
             argv: Optional[Sequence[str]] = None) -> int:
    """``main(argv)``, with bad input (`INPUT_ERRORS`) as one ``error:`` line and exit code 2,
    and Ctrl-C or SIGTERM as a stop (`benchmark.stop`: one line, exit code 130 or 143; from the
    command line the process then ends at once: torch's loader teardown can wait seconds).

    Args:
        main: The tool's entry point; returns its exit code.
        argv: Its arguments (default: the command line). ``--debug`` among them re-raises.
    """
    def work() -> int:
        try:
            return main(argv)
        except INPUT_ERRORS as err:
            if '--debug' in (sys.argv[1:] if argv is None else argv) or stop.requested():
                raise
            return fail(one_line(err))
    return stop.stoppable(work, exit_now=argv is None)


# --- argparse types: each names what it wanted; argparse adds "argument --option:" ----------

def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= low."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'must be an integer >= {low}, got {text!r}') from None
        if value < low:
            raise argparse.ArgumentTypeError(f'must be an integer >= {low}, got {value}')
        return value
    parse.__name__ = f'integer >= {low}'
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def existing_file(text: str) -> str:
    """An argparse type: a file that exists (not a folder)."""
    if osp.isdir(text):
        raise argparse.ArgumentTypeError(f'{text} is a folder, not a file')
    if not osp.isfile(text):
        raise argparse.ArgumentTypeError(f'{text} not found')
    return text


def existing_dir(text: str) -> str:
    """An argparse type: a folder that exists."""
    if not osp.isdir(text):
        raise argparse.ArgumentTypeError(f'{text} is not a folder' if osp.exists(text)
                                         else f'{text} not found')
    return text


def _nearest_existing(path: str) -> str:
    path = osp.abspath(path)
    while not osp.exists(path):
        path = osp.dirname(path)
    return path


def output_dir(text: str) -> str:
    """An argparse type: a folder that exists or can be created, and can be written."""
    if osp.exists(text) and not osp.isdir(text):
        raise argparse.ArgumentTypeError(f'{text} is a file; give a folder')
    base = _nearest_existing(text)
    if not osp.isdir(base):
        raise argparse.ArgumentTypeError(f'{text}: {base} is a file, so the folder cannot be made')
    if not os.access(base, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f'{text}: {base} is not writable')
    return text


def output_file(text: str) -> str:
    """An argparse type: a file that can be written (its folder exists and is writable)."""
    if osp.isdir(text):
        raise argparse.ArgumentTypeError(f'{text} is a folder; give a file name')
    folder = osp.dirname(osp.abspath(text))
    if not osp.isdir(folder):
        raise argparse.ArgumentTypeError(f'{text}: folder {folder} not found')
    if not os.access(folder, os.W_OK) or (osp.exists(text) and not os.access(text, os.W_OK)):
        raise argparse.ArgumentTypeError(f'{text} is not writable')
    return text
