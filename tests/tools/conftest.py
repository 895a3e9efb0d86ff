"""Fixtures of the tool tests: a tool's ``main`` called in-process as its command line calls it,
and the check that bad input is one ``error:`` line on stderr with exit code 2."""
import time
from types import ModuleType

import logging

import pytest
from mmengine.logging import MMLogger

from benchmark.cli import run_tool
from tests.conftest import ROOT


def call_tool(tool: ModuleType, argv: list) -> int:
    """What ``python tools/<name>.py ARGV`` does: train.py calls its main itself (an error during
    training keeps its traceback), every other tool goes through `run_tool`; argparse's exit
    (SystemExit) is returned as the exit code."""
    try:
        if tool.__name__ == 'tools.train':
            return tool.main(argv)
        return run_tool(tool.main, argv)
    except SystemExit as stop:
        return stop.code


@pytest.fixture
def run_main(capsys, monkeypatch):
    """``run_main(tool, *args)`` -> (exit code, stdout, stderr, seconds), run from the repository
    root with wandb switched off, as the tools' subprocess checks run them."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    monkeypatch.delenv('WANDB_API_KEY', raising=False)
    capsys.readouterr()
    loggers = set(MMLogger._instance_dict)

    def run(tool: ModuleType, *args) -> tuple:
        start = time.monotonic()
        code = call_tool(tool, [str(a) for a in args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err, time.monotonic() - start
    yield run
    # A Runner built in the call logs to the stdout this test captured, closed after it: its
    # console handlers go, so that a later test's log lines do not hit a closed stream.
    for name in set(MMLogger._instance_dict) - loggers:
        logger = MMLogger._instance_dict[name]
        for handler in [h for h in logger.handlers if type(h) is logging.StreamHandler]:
            logger.removeHandler(handler)


@pytest.fixture
def one_error_line(run_main):
    """``one_error_line(tool, *args, words=[...])``: the tool's stderr is exactly one ``error:``
    line holding every word, no traceback and no usage text; exit code 2; the line."""
    def check(tool: ModuleType, *args, words=(), seconds: float = 120) -> str:
        code, _, err, took = run_main(tool, *args)
        lines = err.strip().splitlines()
        assert code == 2, err[-3000:]
        assert len(lines) == 1 and lines[0].startswith('error: '), err[-3000:]
        assert 'Traceback' not in err and 'usage:' not in err
        assert all(str(w) in lines[0] for w in words), (lines[0], words)
        assert took < seconds, took
        return lines[0]
    return check
