"""benchmark.cli: argparse errors and known error classes are one `error:` line, exit 2;
the argument types refuse what they say they refuse; only rank 0 prints."""
import os

import pytest

from benchmark.cli import (ArgumentParser, did_you_mean, existing_dir, existing_file,
                           int_at_least, non_negative_int, one_line, output_dir, output_file,
                           positive_int, run_tool)
from benchmark.engine.checkpoints import CheckpointError
from benchmark.engine.config.keywords import ConfigError


def _parser():
    parser = ArgumentParser(prog='tool.py')
    parser.add_argument('--batch-size', type=positive_int, default=8)
    parser.add_argument('--num-workers', type=non_negative_int, default=0)
    parser.add_argument('--kind', choices=['a', 'b'])
    return parser


@pytest.mark.parametrize('argv, line', [
    (['--batch-size', '-1'], 'argument --batch-size: must be an integer >= 1, got -1'),
    (['--batch-size', '0'], 'argument --batch-size: must be an integer >= 1, got 0'),
    (['--batch-size', '2.5'], "argument --batch-size: must be an integer >= 1, got '2.5'"),
    (['--num-workers', '-3'], 'argument --num-workers: must be an integer >= 0, got -3'),
    (['--kind', 'c'], "argument --kind: invalid choice: 'c' (choose from "),
    (['--bogus'], 'unrecognized arguments: --bogus'),
])
def test_bad_argument_is_one_line_exit_2(argv, line, capsys):
    """No usage text: one line naming the option, exit code 2."""
    with pytest.raises(SystemExit) as stop:
        _parser().parse_args(argv)
    lines = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2
    assert len(lines) == 1 and lines[0].startswith(f'error: tool.py: {line}'), lines


def test_only_rank_0_prints(capsys, monkeypatch):
    monkeypatch.setenv('RANK', '1')
    with pytest.raises(SystemExit) as stop:
        _parser().parse_args(['--batch-size', '0'])
    assert stop.value.code == 2 and capsys.readouterr().err == ''
    assert run_tool(lambda argv: (_ for _ in ()).throw(ValueError('x')), []) == 2
    assert capsys.readouterr().err == ''


def test_did_you_mean_names_the_closest_candidate_or_one_the_name_starts():
    assert did_you_mean('temprature', ['temperature', 'queue_size']) == \
        " (did you mean 'temperature'?)"
    assert did_you_mean('loger', ['logger', 'timer'], 'default_hooks') == \
        " (did you mean 'default_hooks.logger'?)"
    assert did_you_mean('Wandb', ['WandbVisBackend', 'LocalVisBackend']) == \
        " (did you mean 'WandbVisBackend'?)"  # too short for difflib: the prefix finds it
    assert did_you_mean('zzz', ['queue_size']) == '' and did_you_mean('', ['a']) == ''


def test_int_types_accept_their_range():
    assert positive_int('3') == 3 and non_negative_int('0') == 0 and int_at_least(-1)('-1') == -1


def test_path_types(tmp_path):
    folder, file = tmp_path / 'dir', tmp_path / 'f.txt'
    folder.mkdir()
    file.write_text('x')
    assert existing_file(str(file)) == str(file)
    assert existing_dir(str(folder)) == str(folder)
    assert output_dir(str(tmp_path / 'new' / 'deeper')) == str(tmp_path / 'new' / 'deeper')
    assert output_file(str(tmp_path / 'out.json')) == str(tmp_path / 'out.json')
    cases = [(existing_file, folder, 'is a folder, not a file'),
             (existing_file, tmp_path / 'nope', 'not found'),
             (existing_dir, file, 'is not a folder'),
             (existing_dir, tmp_path / 'nope', 'not found'),
             (output_dir, file, 'is a file; give a folder'),
             (output_dir, file / 'sub', 'is a file, so the folder cannot be made'),
             (output_file, folder, 'is a folder; give a file name'),
             (output_file, tmp_path / 'nope' / 'out.json', 'not found')]
    for check, path, words in cases:
        with pytest.raises(Exception) as err:
            check(str(path))
        assert type(err.value).__name__ == 'ArgumentTypeError'
        assert str(path) in str(err.value) and words in str(err.value), (check, str(err.value))


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes anywhere')
def test_unwritable_output(tmp_path):
    locked = tmp_path / 'locked'
    locked.mkdir(mode=0o500)
    for check, path in [(output_dir, locked / 'sub'), (output_file, locked / 'f.json')]:
        with pytest.raises(Exception, match='not writable'):
            check(str(path))


@pytest.mark.parametrize('err, line', [
    (ConfigError('model.temperature must be > 0, got 0'),
     'error: model.temperature must be > 0, got 0'),
    (CheckpointError('truncated or corrupt (x); copy it again', 'a.pth'),
     'error: checkpoint a.pth: truncated or corrupt (x); copy it again'),
    (FileNotFoundError(2, 'No such file or directory', 'x.csv'),
     "error: [Errno 2] No such file or directory: 'x.csv'"),
    (ValueError('two\nlines'), 'error: two lines'),
])
def test_run_tool_turns_input_errors_into_one_line(err, line, capsys):
    def main(argv):
        raise err
    assert run_tool(main, []) == 2
    assert capsys.readouterr().err.splitlines() == [line]


def test_run_tool_keeps_tracebacks_for_bugs_and_with_debug():
    def bug(argv):
        raise ZeroDivisionError('a bug')

    def bad_input(argv):
        raise ValueError('bad')
    with pytest.raises(ZeroDivisionError):
        run_tool(bug, [])
    with pytest.raises(ValueError):
        run_tool(bad_input, ['--debug'])
    assert run_tool(lambda argv: 0, []) == 0


def test_one_line():
    assert one_line(KeyError('missing key')) == 'missing key'
    assert one_line(ValueError('a\n  b')) == 'a b'
    assert one_line(ValueError()) == 'ValueError'
