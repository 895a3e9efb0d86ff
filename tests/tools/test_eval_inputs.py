"""tools/eval.py refuses bad checkpoints (truncated, empty, text, a pickle asking for code, a
foreign pickle, a folder, another architecture's weights) with one `error:` line naming the
file, exit code 2, without running the pickle's code or writing a record. In-process."""
import os

import pytest
import torch
from torchvision.models import resnet18, resnet50

from tools import eval as eval_tool

DIGITS = 'configs/mocov2_r18_digits.py'
CHECKPOINT_WORDS = {
    'truncated': 'truncated or corrupt', 'empty': 'is empty', 'text': 'not a torch checkpoint',
    'forbidden': 'refusing to load: it asks for posix.system; only weights are loaded',
    'plain_pickle': 'not a torch checkpoint', 'folder': 'is a folder'}


@pytest.mark.parametrize('kind', sorted(CHECKPOINT_WORDS))
def test_eval_refuses_bad_checkpoints(kind, bad_checkpoints, tmp_path, one_error_line):
    path = bad_checkpoints[kind]
    line = one_error_line(eval_tool, DIGITS, path, '--results-dir', tmp_path / 'results',
                          words=[path])
    assert CHECKPOINT_WORDS[kind] in line or kind == 'folder' and 'is a folder' in line, line
    assert not os.path.exists(bad_checkpoints['marker'])  # the pickled os.system never ran
    assert not (tmp_path / 'results').exists()


def test_eval_refuses_a_checkpoint_of_another_architecture(tmp_path, one_error_line):
    torch.save(resnet50().state_dict(), tmp_path / 'r50.pth')
    one_error_line(eval_tool, DIGITS, tmp_path / 'r50.pth',
                   words=[f'checkpoint {tmp_path / "r50.pth"}: checkpoint does not fit the '
                          'backbone', 'first shape mismatch'])


def test_eval_r18_weights_into_an_r50_config_is_one_line(tmp_path, one_error_line):
    torch.save(resnet18().state_dict(), tmp_path / 'tv.pth')
    one_error_line(eval_tool, 'configs/mixco_r50_tiny.py', tmp_path / 'tv.pth',
                   '--results-dir', tmp_path)
