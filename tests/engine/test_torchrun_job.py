"""torchrun as tools/dist_train.sh runs it, unit by unit: the data check before it starts
(train.py's line, exit 2), its own lines in the run's log, and the job's end as one line and
one code: a process's told line and code, or a line naming the process that ended without
one. The real launches: tests/e2e/test_dist_train_errors.py."""
import argparse
import sys
from pathlib import Path

import pytest
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from benchmark.data.fakes import make_fake_tiny_imagenet, truncate_image_file
from benchmark.engine import launch, torchrun_job
from benchmark.engine.torchrun_job import (TorchrunJob, check_launch, job_log,
                                           without_a_line)
from tests.conftest import ROOT

CONFIG = str(ROOT / 'configs' / 'mixco_r18_tiny.py')


def test_a_read_only_data_root_without_a_cache_is_left_to_the_training_processes(
        tmp_path, capsys, monkeypatch):
    """No cache can be kept there: the layout is checked, the files are decoded by each
    training process (as one process does), not once more before them."""
    data = Path(make_fake_tiny_imagenet(tmp_path, num_classes=2, train_per_class=2,
                                        val_per_class=1, size=8))
    (data / 'train' / 'n00000001' / 'images' / 'n00000001_0.JPEG').write_text('<html>')
    monkeypatch.setattr(torchrun_job.os, 'access', lambda path, mode: False)
    args = _args(tmp_path, f'train_dataloader.dataset.data_root={data}')
    assert check_launch(args)[0] == 0 and capsys.readouterr().err == ''
    assert not (data / '.image_scan.json').exists()
    args = _args(tmp_path, f"train_dataloader.dataset.data_root={data / 'train'}")
    assert check_launch(args)[0] == 2  # the layout still is
    assert 'is malformed: missing wnids.txt' in capsys.readouterr().err


def test_the_config_is_loaded_once_for_its_check_and_the_data_check(tmp_path, capsys,
                                                                   monkeypatch):
    """tools/train.py --check-only and the data check on one load of the config; a bad key is
    train.py's one line and exit code 2, before any data is read."""
    loads, read = [], launch.read_config
    monkeypatch.setattr(launch, 'read_config', lambda path: loads.append(path) or read(path))
    data = make_fake_tiny_imagenet(tmp_path, num_classes=2, train_per_class=2, val_per_class=1,
                                   size=8)
    assert check_launch(_args(tmp_path, f'train_dataloader.dataset.data_root={data}'))[0] == 0
    assert loads == [CONFIG] and capsys.readouterr().err == ''
    assert check_launch(_args(tmp_path, 'model.temprature=0.1')) == (2, None)
    assert capsys.readouterr().err.splitlines() == [
        f"error: {CONFIG}: unknown key 'model.temprature' (did you mean 'model.temperature'?)"]


def _failure(local_rank: int, exitcode: int, when: int) -> ProcessFailure:
    failure = ProcessFailure(local_rank=local_rank, pid=100 + local_rank, exitcode=exitcode,
                             error_file='<N/A>')
    failure.timestamp = when
    return failure


def _args(tmp_path, *options: str) -> argparse.Namespace:
    return argparse.Namespace(config=CONFIG, cfg_options=dict(o.split('=', 1) for o in options),
                              work_dir=str(tmp_path / 'work'), debug=False, check_only=True,
                              resume=None, launcher='none')


def test_the_log_goes_to_the_work_dir_one_per_node(monkeypatch):
    monkeypatch.delenv('NODE_RANK', raising=False)
    assert job_log('w') == 'w/torchrun.log'
    monkeypatch.setenv('NODE_RANK', '2')
    assert job_log('w') == 'w/torchrun.node2.log'


@pytest.mark.parametrize('how', ['missing', 'misplaced', 'bad files'])
def test_the_data_is_checked_before_torchrun_as_train_py_checks_it(how, tmp_path, capsys):
    """A missing root, a root one folder too deep, and image files that do not decode: one
    line, exit 2, as tools/train.py says it."""
    data = tmp_path / 'tiny-imagenet-200'
    if how != 'missing':
        make_fake_tiny_imagenet(tmp_path, num_classes=2, train_per_class=3, val_per_class=1,
                                size=8)
    if how == 'bad files':
        truncate_image_file(data / 'train' / 'n00000000' / 'images' / 'n00000000_1.JPEG')
        (data / 'train' / 'n00000001' / 'images' / 'n00000001_0.JPEG').write_text('<html>')
    root = data / 'train' if how == 'misplaced' else data
    code, log = check_launch(_args(tmp_path, f'train_dataloader.dataset.data_root={root}'))
    lines = capsys.readouterr().err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f'error: {CONFIG}: '), lines
    assert log == str(tmp_path / 'work' / 'torchrun.log')
    assert {'missing': f'dataset root {root} not found',
            'misplaced': f'dataset root {root} is malformed: missing wnids.txt, train',
            'bad files': '2 bad image files (1 non-image, 1 truncated), e.g. train/n00000000/'
                         'images/n00000000_1.JPEG'}[how] in lines[0]
    assert not (tmp_path / 'work').exists()


def test_a_process_that_died_without_a_line_is_named_with_its_signal_and_the_log():
    code, line = without_a_line({1: _failure(1, -9, 5), 0: _failure(0, -15, 6)},
                                "torchrun's report: w/torchrun.log")
    assert code == 1
    assert line == ('error: training process rank 1 (pid 101) ended by Signal 9 (SIGKILL) '
                    'without an error line (killed from outside, e.g. by the out-of-memory '
                    'killer); the others then ended (rank 0: Signal 15 (SIGTERM)); '
                    "torchrun's report: w/torchrun.log")
    code, line = without_a_line({0: _failure(0, 1, 5)}, 'R')
    assert (code, line) == (1, 'error: training process rank 0 (pid 100) failed with exit code 1 '
                               'without an error line (its output is above); R')
    assert 'Signal 11 (SIGSEGV) without an error line (a crash in native code)' in \
        without_a_line({0: _failure(0, -11, 5)}, 'R')[1]


def _job(tmp_path, monkeypatch, raised, told=None):
    """A TorchrunJob around a stand-in torchrun that logs a warning and raises `raised`."""
    import logging
    code_file = tmp_path / 'exit_code'
    monkeypatch.setenv('TRAIN_EXIT_CODE_FILE', str(code_file))
    if told:
        code_file.write_text(told)
    monkeypatch.setattr(sys, 'argv', ['torchrun', '--standalone'])
    job = TorchrunJob(str(tmp_path / 'work' / 'torchrun.log'))
    with job:
        logging.getLogger('torch.distributed.elastic.test').warning('closing signal SIGTERM')
        if raised is not None:
            raise raised
    return job, code_file


def test_a_told_line_ends_the_job_last_with_its_code_the_report_in_the_log(tmp_path, monkeypatch,
                                                                            capsys):
    failed = ChildFailedError('train.py', {1: _failure(1, 2, 5), 0: _failure(0, -15, 6)})
    job, code_file = _job(tmp_path, monkeypatch, failed, told='2\nerror: c.py: a.JPEG: bad\n')
    assert job.end() == 2
    log = tmp_path / 'work' / 'torchrun.log'
    assert capsys.readouterr().err.splitlines() == [
        f"torchrun's report: {log} (how each process ended)", 'error: c.py: a.JPEG: bad']
    text = log.read_text()
    assert text.startswith('\n==== ') and 'torchrun --standalone\n' in text
    assert 'closing signal SIGTERM' in text and 'Root Cause (first observed failure)' in text
    assert text.endswith('error: c.py: a.JPEG: bad\n') and not code_file.exists()


def test_a_told_code_without_a_line_and_a_job_that_trained_say_nothing(tmp_path, monkeypatch,
                                                                        capsys):
    failed = ChildFailedError('train.py', {0: _failure(0, 143, 5)})
    assert _job(tmp_path, monkeypatch, failed, told='143\n')[0].end() == 143  # pre-empted
    assert _job(tmp_path, monkeypatch, SystemExit(0))[0].end() == 0
    assert _job(tmp_path, monkeypatch, None)[0].end() == 0
    assert capsys.readouterr().err == ''


def test_a_job_torchrun_stopped_or_failed_itself_is_one_line(tmp_path, monkeypatch, capsys):
    log = tmp_path / 'work' / 'torchrun.log'
    assert _job(tmp_path, monkeypatch, SignalException('x', 2))[0].end() == 130
    assert _job(tmp_path, monkeypatch, RuntimeError('rendezvous\ntimed out'))[0].end() == 1
    assert capsys.readouterr().err.splitlines() == [
        f"stopped by SIGINT; torchrun's report: {log}",
        f"error: torchrun failed: rendezvous timed out; torchrun's report: {log}"]
    assert log.read_text().count('Traceback (most recent call last)') == 2


def test_a_log_that_cannot_be_written_leaves_the_report_on_the_terminal(tmp_path, monkeypatch,
                                                                        capsys):
    (tmp_path / 'work').write_text('a file where the folder would be')
    failed = ChildFailedError('train.py', {0: _failure(0, -9, 5)})
    assert _job(tmp_path, monkeypatch, failed)[0].end() == 1
    err = capsys.readouterr().err
    assert 'Root Cause' in err and err.splitlines()[-1].endswith("torchrun's report is above")


def test_torchrun_stops_the_processes_left_after_a_failure_with_its_shutdown_timeout(monkeypatch):
    """After a process fails, torchrun stops the others with the shutdown timeout it was given
    (TORCH_ELASTIC_SHUTDOWN_TIMEOUT), as for a signal, not torch's fixed 30 s: both where its
    process context closes itself and where its agent stops the workers."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.elastic.multiprocessing.api import PContext

    from benchmark.engine.torchrun_job import honor_shutdown_timeout
    for owner, name in ((LocalElasticAgent, '_stop_workers'), (PContext, 'close')):
        method = getattr(owner, name)  # torch's own, also where a job in this process fixed it
        monkeypatch.setattr(owner, name, getattr(method, 'replaced', method))
    monkeypatch.setenv('TORCH_ELASTIC_SHUTDOWN_TIMEOUT', '2')

    class Stoppable:
        _shutdown_timeout, _tail_logs, filtered_stdout, filtered_stderr = 7, [], None, None

        def __init__(self):
            self.timeouts = []

        def _shutdown(self, death_sig=None, timeout=30):  # the agent's
            self.timeouts.append(timeout)

        def _close(self, death_sig, timeout):  # the process context's
            self.timeouts.append(timeout)

    honor_shutdown_timeout()
    honor_shutdown_timeout()  # once is enough; twice changes nothing
    agent, context = Stoppable(), Stoppable()
    LocalElasticAgent._stop_workers(agent, None)
    PContext.close(context)  # as SubprocessContext does once a process has failed
    PContext.close(context, timeout=5)  # a timeout given is kept
    assert (agent.timeouts, context.timeouts) == ([7], [2, 5])
