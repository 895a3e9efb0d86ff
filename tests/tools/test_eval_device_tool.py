"""tools/eval.py --device: an explicit CPU device end to end (in-process), and a device this
machine does not have as one `error:` line before anything is built or written."""
import json

import pytest
import torch

from benchmark.names import RANDOM_INIT
from tools import eval as eval_tool

DIGITS = 'configs/mocov2_r18_digits.py'


@pytest.mark.slow
def test_eval_tool_runs_a_random_encoder_on_an_explicit_cpu(tmp_path, run_main):
    code, out, err, _ = run_main(eval_tool, DIGITS, 'random', '--device', 'cpu',
                                 '--protocols', 'knn', 'linear_fast', '--num-workers', '0',
                                 '--results-dir', tmp_path)
    assert code == 0, err[-2000:]
    record = json.loads(next((tmp_path / 'runs').glob('*.json')).read_text())
    assert record['method'] == RANDOM_INIT and set(record['protocols']) == {'knn', 'linear_fast'}
    assert 0 <= record['protocols']['knn']['metrics']['top1'] <= 100
    assert 'knn: top1=' in out


def test_eval_tool_refuses_cuda_without_a_gpu_in_one_line(tmp_path, monkeypatch, one_error_line):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    line = one_error_line(eval_tool, DIGITS, 'random', '--device', 'cuda', '--results-dir',
                          tmp_path / 'results', words=['--device', "device 'cuda'",
                                                       'torch sees no CUDA device'])
    assert 'argument --device:' in line
    assert not (tmp_path / 'results').exists()


def test_eval_tool_refuses_a_misspelt_device_in_one_line(tmp_path, one_error_line):
    one_error_line(eval_tool, DIGITS, 'random', '--device', 'gpu0', '--results-dir',
                   tmp_path / 'results', words=["device 'gpu0' is not a device"])
    assert not (tmp_path / 'results').exists()
