"""The code snapshot a SLURM array runs: what it copies, one folder per content, commands
pointed into it, and the records of code run from it naming the checkout's git state."""
import json
import os
import subprocess
import sys

from benchmark.layout import REPO_ROOT
from benchmark.reports.provenance import git_state
from benchmark.suites.snapshot import in_snapshot, snapshot_code, snapshot_name


def _checkout(root):
    for name, text in {'benchmark/__init__.py': '', 'benchmark/x.py': 'A = 1\n',
                       'benchmark/__pycache__/x.cpython-311.pyc': 'junk',
                       'tools/train.py': 'print(1)\n', 'tools/dist_train.sh': 'echo\n',
                       'configs/a.py': 'x = 1\n', 'methods/m.py': '', 'docs/notes.md': 'no\n',
                       'work_dirs/run/epoch_1.pth': 'big'}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_snapshot_holds_the_code_and_configs_once_per_content(tmp_path):
    root, parent = tmp_path / 'checkout', tmp_path / 'code'
    _checkout(root)
    first = snapshot_code(parent, root)
    assert first == parent / snapshot_name(root)
    held = sorted(str(p.relative_to(first)) for p in first.rglob('*') if p.is_file())
    assert held == ['SOURCE.json', 'benchmark/__init__.py', 'benchmark/x.py', 'configs/a.py',
                    'methods/m.py', 'tools/dist_train.sh', 'tools/train.py']
    assert json.loads((first / 'SOURCE.json').read_text())['source'] == str(root)
    stamp = (first / 'SOURCE.json').stat().st_mtime_ns
    assert snapshot_code(parent, root) == first  # same code: the same folder, not copied again
    assert (first / 'SOURCE.json').stat().st_mtime_ns == stamp
    (root / 'benchmark/x.py').write_text('A = 2\n')  # the checkout moves on (a pull, an edit)
    second = snapshot_code(parent, root)
    assert second != first and (first / 'benchmark/x.py').read_text() == 'A = 1\n'
    assert (second / 'benchmark/x.py').read_text() == 'A = 2\n'
    assert not [p for p in parent.iterdir() if p.name.startswith('.')]  # no staging left


def test_commands_point_into_the_snapshot_only_for_code_and_configs(tmp_path):
    root, snap = tmp_path / 'checkout', tmp_path / 'snap'
    cmd = ['bash', str(root / 'tools/dist_train.sh'), str(root / 'configs/a.py'), '2',
           '--work-dir', str(root / 'work_dirs/r'), 'configs/b.py', '/elsewhere/c.py',
           'model.x=1']
    assert in_snapshot(cmd, snap, root) == [
        'bash', str(snap / 'tools/dist_train.sh'), str(snap / 'configs/a.py'), '2',
        '--work-dir', str(root / 'work_dirs/r'), 'configs/b.py', '/elsewhere/c.py', 'model.x=1']


def test_code_run_from_a_snapshot_records_the_checkouts_git_state(tmp_path):
    """Imported from a snapshot outside any git checkout, the provenance is the one noted at
    the copy (the checkout's), not the state of whatever folder holds the snapshot."""
    snap = snapshot_code(tmp_path / 'code')
    out = subprocess.run(
        [sys.executable, '-c', 'import json, benchmark.reports.provenance as p; '
         'print(json.dumps([p.git_state(), str(p.ROOT)]))'],
        cwd=tmp_path, capture_output=True, text=True, check=True,
        env=dict(os.environ, PYTHONPATH=str(snap)))
    state, root = json.loads(out.stdout)
    assert root == str(snap) and state == git_state() and snap != REPO_ROOT
