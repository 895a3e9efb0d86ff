"""Fixtures shared by the suite tests."""
import os
import shlex
from pathlib import Path

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


STUB = '#!/usr/bin/env bash\nprintf "%s\\n" "$(basename "$0") $*" >> "$STUB_LOG"\n'


@pytest.fixture
def stubs(tmp_path, monkeypatch):
    """sbatch answers 'Submitted batch job 4241', 4242, ... and keeps a copy of each script
    (or refuses with $SBATCH_REFUSES);
    squeue lists a job while $SQUEUE_STATE is set (fails saying $SQUEUE_FAILS if set); srun (which submitit looks for) only
    records. Every call lands in $STUB_LOG."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'sbatch').write_text(
        STUB + 'if [ -n "${SBATCH_REFUSES:-}" ]; then echo "sbatch: error: $SBATCH_REFUSES" >&2; '
        'exit 1; fi\n'
        'n=$(grep -c ^sbatch "$STUB_LOG")\ncp "$1" "$STUB_LOG.script$n"\n'
        'echo "Submitted batch job $((4240 + n))"\n')
    (bin_dir / 'squeue').write_text(
        STUB + 'if [ -n "${SQUEUE_FAILS:-}" ]; then echo "$SQUEUE_FAILS" >&2; exit 1; fi\n'
        '[ -n "${SQUEUE_STATE:-}" ] && echo "$SQUEUE_STATE"\nexit 0\n')
    (bin_dir / 'srun').write_text(STUB)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    log = tmp_path / 'calls.log'
    monkeypatch.setenv('PATH', f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv('STUB_LOG', str(log))
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    for name in ('SQUEUE_STATE', 'SQUEUE_FAILS'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv('SBATCH_REFUSES', raising=False)
    return log


def calls(log: Path, tool: str):
    return [shlex.split(line)[1:] for line in log.read_text().splitlines()
            if line.split()[0] == tool] if log.exists() else []
