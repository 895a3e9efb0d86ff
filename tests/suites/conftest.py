"""Fixtures shared by the suite tests."""
import pytest

from benchmark.suites.spec import expand_suite


@pytest.fixture
def suite_from_text(tmp_path):
    """expand_suite of a suite file written with the given text (its name is the suite's),
    with results and work dirs under tmp_path."""
    def expand(text: str, name: str):
        path = tmp_path / name
        path.write_text(text)
        return expand_suite(str(path), results_root=str(tmp_path / 'results'),
                            work_root=str(tmp_path / 'work'))
    return expand
