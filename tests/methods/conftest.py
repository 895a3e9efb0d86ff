"""One pair of gloo processes runs every two-process check of the method and evaluation tests.

Each module named in `TWO_PROCESS_MODULES` defines ``on_each_process(rank, world) -> dict``; the
pair (tests/methods/gloo_pair.py) runs them in one process group and hands the two results back,
so the session starts processes once rather than once per module, and once in all (`once`)
rather than once per pytest-xdist worker."""
import pytest

from tests.e2e.conftest import once
from tests.methods.gloo_pair import TWO_PROCESS_MODULES, run_on_two_processes


@pytest.fixture(scope='session')
def two_process_results(tmp_path_factory) -> dict:
    """{module name: [rank 0's result, rank 1's]} of every `TWO_PROCESS_MODULES` module (this
    fixture is tests/evaluation/conftest.py's too: one pair for both folders)."""
    return once(tmp_path_factory, 'two-processes',
                lambda folder: run_on_two_processes(TWO_PROCESS_MODULES, folder))
