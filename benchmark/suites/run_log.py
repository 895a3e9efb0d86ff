"""What a step's log says at its end: the `error:` line its command printed last.

A suite appends each attempt of a step to the step's log after a header line
(`benchmark.layout.attempt_header`); tools/dist_train.sh, tools/train.py and tools/eval.py end
a failed attempt with one ``error:`` line (a training process's line, last, under
dist_train.sh). Imports nothing of torch: a SLURM task reads it as it starts.
"""
from __future__ import annotations

import os
from typing import Optional

from benchmark.layout import ATTEMPT_MARK

TAIL_BYTES = 65536  # the end of a log is enough: the line is its last


def error_line(log: str) -> Optional[str]:
    """The last line of the log's last attempt if it is an ``error:`` line, else None (no
    log, or an attempt that ended otherwise: a traceback, a signal)."""
    try:
        with open(log, 'rb') as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - TAIL_BYTES))
            tail = handle.read().decode('utf-8', errors='replace')
    except OSError:
        return None
    attempt = tail.rsplit(ATTEMPT_MARK, 1)[-1]
    lines = [line.strip() for line in attempt.splitlines() if line.strip()]
    return lines[-1] if lines and lines[-1].startswith('error: ') else None


def with_error_line(words: str, log: str) -> str:
    """``words`` (how a step ended) followed by the log's error line, if it has one:
    'failed (exit 2): error: ...'."""
    line = error_line(log)
    return f'{words}: {line}' if line else words
