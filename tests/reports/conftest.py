"""Fixtures shared by the report tests."""
import pytest

from benchmark.reports import records

_PROVENANCE = {}


@pytest.fixture
def quick_provenance(monkeypatch):
    """Records built for their numbers: git state, host and package versions are looked up once
    per session instead of for each record (four git processes a record). Opt in with
    ``pytestmark = pytest.mark.usefixtures('quick_provenance')``; tests of provenance itself
    must not."""
    for name in ('git_state', 'host_info', 'package_versions'):
        if name not in _PROVENANCE:
            _PROVENANCE[name] = getattr(records, name)()
        monkeypatch.setattr(records, name, lambda value=_PROVENANCE[name]: dict(value))
