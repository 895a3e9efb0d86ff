"""tools/train.py meets an error found late, in one process of several: its one line and exit
code reach tools/dist_train.sh (TRAIN_EXIT_CODE_FILE) whatever its rank; a process whose
training breaks after another one told its line ends quietly. A stand-in runner raises what a
real run would (the real launches: tests/e2e/test_dist_train_errors.py)."""
import argparse
from types import SimpleNamespace

import pytest

from benchmark.data.base import BadImageError
from benchmark.engine.late_errors import bad_input
from benchmark.engine.nan_guard import DivergedError
from tools import train

CONFIG = 'configs/mixco_r18_tiny.py'
WORKER = ('Caught BadImageError in DataLoader worker process 0.\nOriginal Traceback (most recent '
          'call last):\n  File "x.py", line 1, in f\nbenchmark.data.base.BadImageError: '
          'd/a.JPEG: truncated image file (image file is truncated); fix or remove it, or set '
          'train_dataloader.dataset.bad_data=skip\n')


class _Runner:
    """What `train.train` uses of mmengine's Runner; its training raises `error`."""

    def __init__(self, error):
        self.error, self.cfg = error, SimpleNamespace()
        self.logger = SimpleNamespace(error=lambda text: None)

    def register_hook(self, hook, priority='NORMAL'):
        pass

    def train(self):
        raise self.error


@pytest.fixture
def told(tmp_path, monkeypatch):
    path = tmp_path / 'exit_code'
    monkeypatch.setenv('TRAIN_EXIT_CODE_FILE', str(path))
    monkeypatch.setenv('RANK', '1')
    monkeypatch.setenv('LOCAL_RANK', '1')
    return path


def _train(error) -> int:
    args = argparse.Namespace(config=CONFIG, debug=False, no_eval=True, results_dir='results')
    return train.train(_Runner(error), args, {})


def test_a_file_gone_bad_on_rank_1_is_its_line_and_exit_2(told, capsys):
    assert _train(BadImageError(WORKER)) == 2
    line = (f'error: {CONFIG}: d/a.JPEG: truncated image file (image file is truncated); fix or '
            'remove it, or set train_dataloader.dataset.bad_data=skip (in DataLoader worker '
            'process 0)')
    assert capsys.readouterr().err == line + '\n'  # said where it happened, whatever the rank
    assert told.read_text() == f'2\n{line}\n'


def test_a_divergence_tells_its_line_with_code_3(told):
    assert _train(DivergedError('training diverged at iteration 5 (epoch 1): loss = nan on '
                                'process 1')) == 3
    assert told.read_text() == ('3\nerror: training diverged at iteration 5 (epoch 1): loss = '
                                'nan on process 1\n')
    told.unlink()  # the processes that learn it from that one leave the line to it
    assert _train(DivergedError('training diverged between iterations 5 and 5: a non-finite '
                                'loss on another process', elsewhere=True)) == 3
    assert not told.exists()


def test_a_broken_collective_after_another_process_told_its_line_ends_quietly(told, capsys):
    broken = RuntimeError('Connection closed by peer [127.0.0.1]:22668')
    with pytest.raises(RuntimeError):  # nobody told: a failure of its own, with its traceback
        _train(broken)
    told.write_text('2\nerror: x\n')  # another process's line
    assert _train(broken) == 1
    assert capsys.readouterr().err == '' and told.read_text() == '2\nerror: x\n'


def test_bad_input_met_while_building_is_told_by_any_process_said_by_rank_0(told, capsys):
    """A checkpoint that does not fit, a GPU missing for local rank 1: found while the run is
    built, on one process or all; rank 0 prints it (once for all), the launcher gets it from
    whichever process met it."""
    assert bad_input(f'{CONFIG}: the process of local rank 1 has no GPU') == 2
    assert capsys.readouterr().err == ''  # rank 1
    assert told.read_text() == f'2\nerror: {CONFIG}: the process of local rank 1 has no GPU\n'
