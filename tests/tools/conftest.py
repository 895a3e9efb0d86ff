"""The check of the tool tests: bad input is one ``error:`` line on stderr with exit code 2
(`run_main`, in tests/conftest.py, calls a tool's ``main`` in-process)."""
from types import ModuleType

import pytest


@pytest.fixture
def one_error_line(run_main):
    """``one_error_line(tool, *args, words=[...])``: the tool's stderr is exactly one ``error:``
    line holding every word, no traceback and no usage text; exit code 2; the line."""
    def check(tool: ModuleType, *args, words=()) -> str:
        code, _, err, _ = run_main(tool, *args)
        lines = err.strip().splitlines()
        assert code == 2, err[-3000:]
        assert len(lines) == 1 and lines[0].startswith('error: '), err[-3000:]
        assert 'Traceback' not in err and 'usage:' not in err
        assert all(str(w) in lines[0] for w in words), (lines[0], words)
        return lines[0]
    return check
