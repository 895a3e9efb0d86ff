"""docs/methods.md "Adding a method": its example, applied as written to a copy of the
repository, gives a method whose bad values the check refuses in one line, whose own test
passes, which trains, evaluates, and appears on the leaderboard under its label."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

COPIED = ('benchmark', 'methods', 'tools', 'configs', 'docs', 'tests', 'setup.cfg')
# A block's heading: **`path`** (new file) | , after (or before) the line starting `x`
HEADING = re.compile(r'^\*\*`(?P<path>[^`]+)`\*\*(?P<where>[^\n]*):\n\n```\w*\n(?P<body>.*?)```',
                     re.S | re.M)
AT_LINE = re.compile(r'(after|before) the line starting (?:``(.+?)``|`(.+?)`)$')


def example_steps() -> list:
    """(path, where, body) of every block of the example, in order."""
    text = (ROOT / 'docs' / 'methods.md').read_text()
    section = text[text.index('### Example:'):]
    section = section[:section.find('\n## ')] if '\n## ' in section else section
    return [(m['path'], m['where'].strip(' ,'), m['body']) for m in HEADING.finditer(section)]


def apply(repo: Path, path: str, where: str, body: str) -> None:
    target = repo / path
    if where == '(new file)':
        assert not target.exists(), f'{path} exists already'
        target.write_text(body)
        return
    at_line = AT_LINE.fullmatch(where)
    assert at_line, f'docs/methods.md: cannot read where the block for {path} goes: {where!r}'
    start = (at_line[2] or at_line[3]).strip()
    lines = target.read_text().split('\n')
    at = [i for i, line in enumerate(lines) if line.strip().startswith(start)]
    assert len(at) == 1, f'{path}: {len(at)} lines start with {start!r}, want 1'
    i = at[0] + (at_line[1] == 'after')
    lines[i:i] = body.rstrip('\n').split('\n')
    target.write_text('\n'.join(lines))


def test_the_example_has_a_file_its_registration_config_and_test():
    paths = [path for path, _, _ in example_steps()]
    assert paths == ['methods/barlowtwins.py', 'methods/__init__.py', 'benchmark/names.py',
                     'configs/barlowtwins_r18_digits.py', 'docs/configuration.md',
                     'docs/methods.md', 'tests/methods/test_barlowtwins.py']


@pytest.fixture(scope='module')
def repo(tmp_path_factory) -> Path:
    """A copy of the repository with the example's blocks applied."""
    copy = tmp_path_factory.mktemp('with_a_new_method')
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns(
                '__pycache__', '*.pyc', 'figures'))
        else:
            shutil.copy(source, copy / name)
    for step in example_steps():
        apply(copy, *step)
    return copy


def run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(repo), WANDB_MODE='disabled')
    env.pop('PYTEST_ADDOPTS', None)  # the outer session's options are not the inner pytest's
    return subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=900)


# One process runs the tools as their command lines do (`run_tool`: bad input as one line and
# exit code 2), each tool's code and stderr written as a JSON line on stdout: the check, the
# training, the evaluation and the leaderboard, each of which runs as its own process elsewhere
# in the e2e tests; here one interpreter start serves them all.
TOOLS = """
import contextlib, io, json, sys
from benchmark.cli import run_tool
from tools import eval as eval_tool, leaderboard, train
for name, argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = run_tool({'train': train.main, 'eval': eval_tool.main,
                         'leaderboard': leaderboard.main}[name], argv)
    print(json.dumps([name, code, err.getvalue()]), flush=True)
"""


def run_tools(repo: Path, *steps) -> list:
    """(tool, exit code, stderr) of each step, all run in one process (`TOOLS`)."""
    done = run(repo, '-c', TOOLS, json.dumps([[name, list(map(str, argv))] for name, argv
                                              in steps]))
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith('["')]


def test_a_new_method_by_the_documented_steps_reaches_the_leaderboard(repo, tmp_path):
    config = 'configs/barlowtwins_r18_digits.py'
    work, results = tmp_path / 'work', tmp_path / 'results'

    # Its own test, and the suite's tests over every method and every doc table, which hold
    # with the new method in and cover it (it resumes; its config is registered; the speed
    # harness times it): one pytest.
    tests = run(repo, '-m', 'pytest', '-v', '-p', 'no:cacheprovider',
                'tests/methods/test_barlowtwins.py', 'tests/test_names.py',
                'tests/test_configs.py', 'tests/methods/test_method_resume.py',
                'tests/test_components.py', 'tests/harness/speed/test_speed_step.py')
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert len(re.findall(r'^tests/methods/test_barlowtwins\.py::\S+ PASSED', tests.stdout,
                          re.M)) == 2, tests.stdout[-3000:]
    for covered in ('bit_identical[barlowtwins] PASSED',
                    'registered[configs/barlowtwins_r18_digits.py] PASSED'):
        assert covered in tests.stdout, tests.stdout[-3000:]

    (_, code, err), *steps = run_tools(
        repo,
        ('train', [config, '--check-only', '--cfg-options', 'model.hidden_dim=-3']),
        ('train', [config, '--work-dir', work, '--no-eval', '--cfg-options',
                   'train_cfg.max_epochs=1', 'train_dataloader.num_batch_per_epoch=3',
                   'model.hidden_dim=32', 'model.output_dim=32']),
        ('eval', [config, work / 'epoch_1.pth', '--protocols', 'knn', '--results-dir', results]),
        ('leaderboard', ['--results-dir', results, '--paper', 'none']))
    assert code == 2, err  # a bad value: one line, before anything else
    assert err.count('\n') == 1 and err.startswith('error: '), err
    assert 'model.hidden_dim=-3 refused by BarlowTwins' in err
    assert [(name, code) for name, code, _ in steps] == [
        ('train', 0), ('eval', 0), ('leaderboard', 0)], steps[-1][2][-3000:]
    rows = [line for line in (results / 'leaderboard.md').read_text().split('\n')
            if line.startswith('| digits | kNN |')]
    assert len(rows) == 1 and '| Barlow Twins' in rows[0], rows
