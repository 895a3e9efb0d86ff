"""The evaluation tests' two-process checks run in the method tests' gloo pair: one pair of
processes per session for both folders (tests/methods/conftest.py)."""
from tests.methods.conftest import two_process_results  # noqa: F401  (the fixture)
