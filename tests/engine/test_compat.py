"""The mmengine workarounds in benchmark/engine/compat.py (each test fails without its fix), and
the private mmengine names the suite uses (one test per name, naming it)."""
import pickle
import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MessageHub

from benchmark.dist import free_groups
from benchmark.engine.compat import (
    MMENGINE_HISTORY_UPDATE,
    PRIVATE_API,
    allow_mmengine_checkpoints,
    history_buffer_statistic,
    manager_instances,
    parse_cfg_option,
    private_api_problem,
    runner_resumes,
    setup_cpu_distributed,
    wandb_init_kwargs,
)
from tests.conftest import ROOT


@pytest.fixture
def mmengine_checkpoint(tmp_path):
    """A checkpoint holding what mmengine's Runner saves: weights plus the message hub."""
    hub = MessageHub.get_instance('compat-test')
    hub.update_scalar('train/loss', 1.5)
    hub.update_info('epoch', 3)
    path = tmp_path / 'ckpt.pth'
    torch.save({'state_dict': {'w': torch.ones(2)}, 'message_hub': hub.state_dict(),
                'meta': {'epoch': 3}}, path)
    return path


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_stock_torch_load_fails_on_mmengine_checkpoint(mmengine_checkpoint):
    """Without the allow-list torch>=2.6 refuses mmengine's checkpoint (open-mmlab/mmengine#1655)."""
    proc = run_python(f'''
        import torch
        torch.load({str(mmengine_checkpoint)!r})
    ''')
    assert proc.returncode != 0 and 'Weights only load failed' in proc.stderr


def test_allow_list_loads_mmengine_checkpoint(mmengine_checkpoint):
    """With the allow-list the same file loads with weights_only=True and keeps its logs."""
    allow_mmengine_checkpoints()
    ckpt = torch.load(mmengine_checkpoint, weights_only=True)
    assert torch.equal(ckpt['state_dict']['w'], torch.ones(2))
    assert ckpt['message_hub']['log_scalars']['train/loss'].current() == 1.5


class _Payload:
    """Pickles as a call to os.system: what a malicious checkpoint does."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return os.system, (f'touch {self.marker}',)


def test_malicious_checkpoint_is_refused_and_nothing_runs(tmp_path):
    """A pickle that would run a shell command is refused; the command never runs."""
    marker = tmp_path / 'pwned'
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'x': _Payload(marker)}, path)
    allow_mmengine_checkpoints()
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)
    assert not marker.exists()


def test_getattr_stand_in_only_serves_history_buffer_statistics():
    """The getattr stand-in refuses any look-up other than HistoryBuffer's statistics."""
    from mmengine.logging.history_buffer import HistoryBuffer
    assert history_buffer_statistic(HistoryBuffer, 'mean') is HistoryBuffer.mean
    with pytest.raises(pickle.UnpicklingError):
        history_buffer_statistic(HistoryBuffer, '__init__')
    import os
    with pytest.raises(pickle.UnpicklingError):
        history_buffer_statistic(os, 'system')


def _sample_stream(seed: int, n: int) -> list:
    """(value, count) pairs as a message hub receives them: floats, ints and bools."""
    rng = random.Random(seed)
    return [(rng.choice([rng.uniform(-3, 3), rng.randint(-5, 5), True, 1e-30]),
             rng.randint(1, 3)) for _ in range(n)]


@pytest.mark.parametrize('max_length', [1, 7, 1000, 1000000])
def test_history_buffer_values_and_statistics_are_mmengines(max_length):
    """The amortized update stores what mmengine's np.append stores (values, counts, dtypes,
    trimming to max_length), so every statistic over every window is mmengine's."""
    from mmengine.logging.history_buffer import HistoryBuffer
    ours, theirs = HistoryBuffer(max_length=max_length), HistoryBuffer(max_length=max_length)
    for i, (value, count) in enumerate(_sample_stream(max_length, 2500)):
        ours.update(value, count)
        MMENGINE_HISTORY_UPDATE(theirs, value, count)
        (a, ca), (b, cb) = ours.data, theirs.data
        assert a.dtype == b.dtype and ca.dtype == cb.dtype
        assert np.array_equal(a, b) and np.array_equal(ca, cb)
        if i % 97 == 0:
            for window in (None, 1, 10, 50, 5000):
                for stat in ('mean', 'min', 'max'):
                    assert ours.statistics(stat, window) == theirs.statistics(stat, window)
            assert ours.current() == theirs.current()
    with pytest.raises(TypeError):
        ours.update('1.0')


def test_history_buffer_update_does_not_copy_the_history():
    """mmengine's update copies the whole history each time (np.append): 10,000 updates make
    10,000 new arrays. Ours writes into spare room: a new array only when the room is full."""
    from mmengine.logging.history_buffer import HistoryBuffer

    def fresh_arrays(update) -> int:
        buf, count = HistoryBuffer([0.0], [1]), 0
        for i in range(10000):
            before = buf.data[0]
            update(buf, float(i), 1)
            count += not np.shares_memory(before, buf.data[0])
        return count

    assert fresh_arrays(MMENGINE_HISTORY_UPDATE) == 10000  # what the fix removes
    assert fresh_arrays(HistoryBuffer.update) <= 10  # doublings: 64, 128, ..., 16384


def test_history_buffer_pickles_as_mmengine_and_resumes(tmp_path):
    """A checkpoint holds mmengine's attributes only (no spare room), loads with
    weights_only=True, and a loaded buffer goes on updating as mmengine's would."""
    hub = MessageHub.get_instance('compat-history-test')
    for i in range(300):
        hub.update_scalar('train/loss', 1.0 / (i + 1))
    buf = hub.get_scalar('train/loss')
    assert set(buf.__getstate__()) == {'max_length', '_log_history', '_count_history',
                                      'statistics_methods'}
    torch.save({'message_hub': hub.state_dict()}, tmp_path / 'c.pth')
    allow_mmengine_checkpoints()
    loaded = torch.load(tmp_path / 'c.pth', weights_only=True)['message_hub']
    resumed = loaded['log_scalars']['train/loss']
    assert np.array_equal(resumed.data[0], buf.data[0])
    resumed.update(0.5)
    MMENGINE_HISTORY_UPDATE(buf, 0.5, 1)
    assert np.array_equal(resumed.data[0], buf.data[0]) and resumed.mean(10) == buf.mean(10)


def test_cpu_distributed_uses_gloo_and_no_device_ids(monkeypatch):
    """Without CUDA a torchrun launch gets gloo and DDP(device_ids=None); 'none' is untouched."""
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(backend='nccl'))))
    setup_cpu_distributed(cfg, 'none')
    assert cfg.env_cfg.dist_cfg.backend == 'nccl' and 'model_wrapper_cfg' not in cfg
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    monkeypatch.setattr(torch.distributed, 'is_initialized', lambda: True)
    setup_cpu_distributed(cfg, 'pytorch')
    assert cfg.env_cfg.dist_cfg.backend == 'gloo'
    assert cfg.model_wrapper_cfg['device_ids'] is None
    assert cfg.model_wrapper_cfg['type'] == 'MMDistributedDataParallel'


def test_gpu_path_keeps_nccl(monkeypatch):
    """With CUDA present mmengine's NCCL path runs as shipped; only the collective timeout is
    set (tests/engine/test_dist_timeout.py)."""
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(backend='nccl'))))
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    setup_cpu_distributed(cfg, 'pytorch')
    assert cfg.env_cfg.dist_cfg == dict(backend='nccl', timeout=1800)
    assert 'model_wrapper_cfg' not in cfg


def test_a_torchrun_process_without_a_gpu_of_its_own_is_one_line(monkeypatch):
    """Two processes on a machine with one visible GPU: the process of local rank 1 fails with
    one line (mmengine's `torch.cuda.set_device(1)` would raise a CUDA error); rank 0 trains."""
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(backend='nccl'))))
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '3')
    monkeypatch.setenv('LOCAL_RANK', '1')
    with pytest.raises(ValueError) as err:
        setup_cpu_distributed(cfg, 'pytorch')
    assert str(err.value) == ('the process of local rank 1 has no GPU: torch sees 1 CUDA device(s) '
                              'on this machine (CUDA_VISIBLE_DEVICES=3); start at most 1 '
                              'process(es) per machine, or make more GPUs visible')
    monkeypatch.setenv('LOCAL_RANK', '0')
    setup_cpu_distributed(cfg, 'pytorch')


# -- mmengine's private names: each one the suite uses is where and as it expects ---------------
@pytest.mark.parametrize('entry', PRIVATE_API, ids=lambda entry: entry.qualname)
def test_private_mmengine_name_is_as_used(entry):
    import importlib
    package = importlib.import_module(entry.module.split('.')[0])
    problem = private_api_problem(entry)
    assert problem is None, (f'{package.__name__} {package.__version__}: {entry.qualname} '
                             f'{problem}; used by {entry.used_by} (benchmark/engine/compat.py)')


def test_the_private_name_check_notices_a_change():
    """A name that is gone, a changed signature, an attribute no longer set: each is reported."""
    from benchmark.engine.compat import PrivateName
    assert private_api_problem(PrivateName(
        'mmengine.runner', 'Runner', '_resumes', 'attribute', None, '')) == \
        'is no longer set by mmengine'
    assert private_api_problem(PrivateName(
        'mmengine.hooks', 'CheckpointHook', '_save_checkpoint_with_step', 'method',
        ('runner', 'step'), '')) == 'takes (runner, step, meta), not (runner, step)'
    assert private_api_problem(PrivateName(
        'mmengine.hooks', 'CheckpointHook', '_save', 'method', None, '')) == 'is gone'
    assert private_api_problem(PrivateName(
        'mmengine.hooks', 'NoSuchHook', '_x', 'method', None, '')) == 'mmengine.hooks has no NoSuchHook'


# The private names read from outside a subclass, as code would spell them: only compat.py may.
OUTSIDE_A_SUBCLASS = re.compile(r"runner\._resume\b|'_resume'|\._parse_iterable\b|"
                                r"\._instance_dict\b|'_instance_dict'|backend\._init_kwargs\b|"
                                r"'_init_kwargs'")


def test_private_names_are_read_only_through_compat():
    """Code and tests reach Runner._resume, DictAction._parse_iterable, a wandb backend's
    _init_kwargs and MMLogger._instance_dict through compat.py's functions only."""
    found = []
    for folder in ('benchmark', 'methods', 'tools', 'tests'):
        for path in (ROOT / folder).rglob('*.py'):
            if path.name in ('compat.py', 'test_compat.py'):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if OUTSIDE_A_SUBCLASS.search(line):
                    found.append(f'{path.relative_to(ROOT)}:{number}: {line.strip()}')
    assert not found, 'use benchmark/engine/compat.py:\n' + '\n'.join(found)


def test_runner_resumes_reads_the_runners_resume_flag(tmp_path):
    """Runner._resume: True only for resume=True (SafeCheckpointHook restores RNG states then)."""
    from mmengine.model import BaseModel
    from mmengine.runner import Runner

    class Model(BaseModel):
        def forward(self, *args, **kwargs):
            return {}

    for resume in (True, False):
        runner = Runner(model=Model(), work_dir=str(tmp_path / str(resume)), resume=resume,
                        experiment_name=f'compat-resume-{resume}')
        assert runner_resumes(runner) is resume


def test_parse_cfg_option_reads_values_as_cfg_options_does():
    """DictAction._parse_iterable: the reading of --cfg-options values the suites rely on."""
    assert parse_cfg_option('[1,2]') == [1, 2]
    assert parse_cfg_option('(a,b)') == ('a', 'b')
    assert parse_cfg_option('0.5') == 0.5 and parse_cfg_option('8') == 8
    assert parse_cfg_option('True') is True and parse_cfg_option('None') is None
    assert parse_cfg_option('mocov2') == 'mocov2'


def test_checkpoint_hook_saves_an_epoch_through_save_checkpoint_with_step():
    """CheckpointHook._save_checkpoint(runner) hands (runner, step, meta) to
    _save_checkpoint_with_step, which SafeCheckpointHook overrides."""
    from types import SimpleNamespace

    from mmengine.hooks import CheckpointHook
    calls = []

    class Recording(CheckpointHook):
        def _save_checkpoint_with_step(self, runner, step, meta):
            calls.append((step, meta))

    runner = SimpleNamespace(epoch=2, iter=30)
    Recording(by_epoch=True)._save_checkpoint(runner)
    Recording(by_epoch=False)._save_checkpoint(runner)
    assert calls == [(3, dict(epoch=3, iter=30)), (31, dict(epoch=2, iter=31))]


def test_wandb_backend_starts_through_init_env_with_its_init_kwargs(tmp_path):
    """WandbVisBackend._init_env runs once, on first use, with `_init_kwargs` as given: what
    SafeWandbVisBackend overrides and wandb_init_kwargs reads."""
    from mmengine.visualization import WandbVisBackend
    started = []

    class Recording(WandbVisBackend):
        def _init_env(self):
            started.append(wandb_init_kwargs(self))
            self._wandb = 'wandb'

    backend = Recording(save_dir=str(tmp_path), init_kwargs=dict(id='abc'), log_code_name='src')
    assert started == [] and backend._log_code_name == 'src'
    assert backend.experiment == 'wandb' and backend.experiment == 'wandb'
    assert started == [dict(id='abc')]


def test_manager_instances_lists_the_named_loggers():
    from mmengine.logging import MMLogger
    MMLogger.get_instance('compat-manager-test')
    assert 'compat-manager-test' in manager_instances(MMLogger)


def test_a_collected_loaders_workers_are_stopped_not_terminated(monkeypatch):
    """A loader with persistent workers, reachable only through a reference cycle (as a runner
    holds its loaders), freed by benchmark.dist.free_groups at the end of tools/train.py: its
    worker is stopped first and ends by itself. Left to the collection alone, the worker never
    hears the stop: torch waits for it (MP_STATUS_CHECK_INTERVAL, 5 s; 0.5 s here), then
    terminates it. A weak proxy whose object is gone (torch.compile leaves some) is passed over."""
    import multiprocessing.process
    import weakref
    from torch.utils.data import DataLoader, TensorDataset, _utils
    terminated = []
    terminate = multiprocessing.process.BaseProcess.terminate
    monkeypatch.setattr(multiprocessing.process.BaseProcess, 'terminate',
                        lambda self: (terminated.append(self.pid), terminate(self)))
    monkeypatch.setattr(_utils, 'MP_STATUS_CHECK_INTERVAL', 0.5)
    loader = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=2, num_workers=1,
                        persistent_workers=True)
    for _ in range(2):
        assert len(list(loader)) == 4
    workers = list(loader._iterator._workers)
    cycle = [loader]
    cycle.append(cycle)
    del loader, cycle
    gone = [weakref.proxy(type('Gone', (), {})())]  # alive (in gc's objects) until the del
    free_groups()
    del gone
    for worker in workers:
        worker.join(timeout=60)
    assert terminated == [] and [worker.exitcode for worker in workers] == [0]
