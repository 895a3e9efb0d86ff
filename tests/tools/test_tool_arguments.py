"""Every tool's bad paths and numbers are one `error:` line naming the option or file, exit
code 2, before anything runs: eval.py, leaderboard.py, prepare_data.py, benchmark_speed.py,
run_suite.py and fault_campaign.py, called in-process."""
import pytest

from tools import benchmark_speed, fault_campaign, leaderboard, prepare_data, run_suite
from tools import eval as eval_tool

DIGITS = 'configs/mocov2_r18_digits.py'
TOOLS = {'eval.py': eval_tool, 'leaderboard.py': leaderboard, 'prepare_data.py': prepare_data,
         'benchmark_speed.py': benchmark_speed, 'run_suite.py': run_suite,
         'fault_campaign.py': fault_campaign}


@pytest.fixture
def files(tmp_path):
    (tmp_path / 'a_file').write_text('x\n')
    (tmp_path / 'results' / 'runs').mkdir(parents=True)
    (tmp_path / 'columns.csv').write_text('a,b\n1,2\n')
    (tmp_path / 'binary.csv').write_bytes(b'\x00\xff\xfe\x00garbage')
    return tmp_path


CASES = [
    ('eval.py', ['{tmp}/nope.py', 'random'], ['argument config', 'nope.py not found']),
    ('eval.py', [DIGITS, '{tmp}/nope.pth'], ['argument checkpoint', 'nope.pth not found']),
    ('eval.py', [DIGITS, 'random', '--batch-size', '-1'], ['--batch-size', '>= 1, got -1']),
    ('eval.py', [DIGITS, 'random', '--num-workers', '-2'], ['--num-workers', '>= 0, got -2']),
    ('eval.py', [DIGITS, 'random', '--linear-config', '{tmp}/nope.py'], ['--linear-config']),
    ('eval.py', [DIGITS, 'random', '--results-dir', '{tmp}/a_file'], ['--results-dir', 'a file']),
    ('eval.py', [DIGITS, 'random', '--protocols', 'knn', 'bogus'], ['--protocols', "'bogus'"]),
    ('eval.py', [DIGITS, 'random', '--cfg-options', 'model.temperature=0'],
     [DIGITS, 'model.temperature must be > 0']),
    ('leaderboard.py', ['--results-dir', '{tmp}/nope'], ['--results-dir', 'nope not found']),
    ('leaderboard.py', ['--results-dir', '{tmp}/a_file'], ['--results-dir', 'not a folder']),
    ('leaderboard.py', ['--results-dir', '{tmp}/results', '--paper', '{tmp}/nope.csv'],
     ['--paper', 'nope.csv not found']),
    ('leaderboard.py', ['--results-dir', '{tmp}/results', '--paper', '{tmp}/columns.csv'],
     ['columns.csv', 'missing column(s)']),
    ('leaderboard.py', ['--results-dir', '{tmp}/results', '--paper', '{tmp}/binary.csv'],
     ['--paper', 'binary.csv', 'not a UTF-8']),
    ('leaderboard.py', ['--bogus'], ['unrecognized arguments: --bogus']),
    ('prepare_data.py', ['check', 'tiny', '--root', '{tmp}/nope'], ['{tmp}/nope not found']),
    ('prepare_data.py', ['check', 'folder', '--root', '{tmp}/a_file'], ['{tmp}/a_file']),
    ('prepare_data.py', ['check', 'imagenot', '--root', '{tmp}'], ["'imagenot'"]),
    ('prepare_data.py', ['fetch'], ["argument command: invalid choice: 'fetch'"]),
    ('prepare_data.py', ['check', 'tiny'], ['--root']),
    ('prepare_data.py', ['tiny', '--root', '{tmp}/a_file', '--no-download'],
     ['--root', 'a_file is a file']),
    ('prepare_data.py', ['cifar10', '--root', '{tmp}', '--no-download'],
     ['{tmp}', 'cifar-10-batches-py']),
    ('benchmark_speed.py', ['--batch', '0'], ['need positive sizes', '--batch=0']),
    ('benchmark_speed.py', ['--batch', '5'], ['an even batch', 'got --batch=5']),
    ('benchmark_speed.py', ['--out-dir', '{tmp}/a_file'], ['--out-dir', 'a_file is a file']),
    ('benchmark_speed.py', ['--repeats', '0'], ['need positive sizes', '--repeats=0']),
    ('benchmark_speed.py', ['--knn-k', '-1'], ['need positive sizes', '--knn-k=-1']),
    ('benchmark_speed.py', ['--input-size', 'big'], ['--input-size', "invalid int value: 'big'"]),
    ('benchmark_speed.py', ['--num-workers', '-1'], ['--num-workers', '>= 0, got -1']),
    ('benchmark_speed.py', ['--out', '{tmp}/nope/s.json'], ['--out', 'nope not found']),
    ('benchmark_speed.py', ['--table', '{tmp}'], ['--table', 'is a folder']),
    ('run_suite.py', ['{tmp}/nope.py', '--dry-run'], ['nope.py not found']),
    ('run_suite.py', ['demo_digits', '--seeds', '-1'], ['--seeds', '>= 0, got -1']),
    ('run_suite.py', ['demo_digits', '--paper', '{tmp}/nope.csv'], ['--paper', 'not found']),
    ('run_suite.py', ['demo_digits', '--work-root', '{tmp}/a_file'], ['--work-root', 'a file']),
    ('fault_campaign.py', ['--out', '{tmp}/a_file'], ['--out', 'a_file is a file']),
    ('fault_campaign.py', ['--seed', '-1'], ['--seed', '>= 0, got -1']),
]


@pytest.mark.parametrize('name, args, words', CASES,
                         ids=[f'{c[0]}:{" ".join(c[1])}' for c in CASES])
def test_tool_bad_input_is_one_line(name, args, words, files, one_error_line):
    fill = [a.replace('{tmp}', str(files)) for a in args]
    one_error_line(TOOLS[name], *fill, words=[w.replace('{tmp}', str(files)) for w in words])


@pytest.mark.parametrize('args, needle', [
    (['--batch', '5'], '--batch=5'),
    (['--configs', 'gpu-fp16'], "'gpu-fp16'"),
    (['--paper', '--images', '48', '--batch', '8', '--pipeline-iters', '4'], 'raise --images'),
    (['--images', '0'], '--images=0')])
def test_benchmark_speed_settings_errors_name_the_tool(args, needle, one_error_line):
    line = one_error_line(benchmark_speed, *args, words=[needle])
    assert line.startswith('error: benchmark_speed: ')


def test_run_suite_bad_suite_file_is_one_line_before_anything_runs(tmp_path, run_main):
    bad = tmp_path / 'tiny.py'
    bad.write_text("configs = [dict(config='configs/mixco_r18_digits.py', "
                   "grid={'model.mix_temprature': [0.1]})]\n")
    code, out, err, _ = run_main(run_suite, bad, '--dry-run')
    assert code == 2 and out == ''
    assert err.count('\n') == 1 and err.startswith('error: suite ')
    assert "unknown key 'model.mix_temprature'" in err
