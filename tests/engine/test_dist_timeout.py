"""env_cfg.dist_cfg.timeout: one key, the collective timeout of gloo (CPU processes) and NCCL
(GPUs) alike, default 1800 s. Each backend's path is followed to torch's init_process_group,
which records what it got instead of starting a process group (no GPU needed)."""
import datetime

import pytest
import torch
import torch.distributed as torch_dist
from mmengine.config import Config
from mmengine.dist import utils as mmengine_dist

from benchmark.engine.compat import DIST_TIMEOUT_S, dist_timeout, setup_cpu_distributed


@pytest.fixture
def init_calls(monkeypatch):
    """The keyword arguments of every init_process_group call; a launch by torchrun."""
    calls = []
    monkeypatch.setattr(torch_dist, 'init_process_group', lambda **kw: calls.append(kw))
    monkeypatch.setattr(torch_dist, 'is_initialized', lambda: False)
    for name, value in dict(RANK='0', LOCAL_RANK='0', WORLD_SIZE='1').items():
        monkeypatch.setenv(name, value)
    return calls


def launch(cfg: Config, cuda: bool, monkeypatch) -> None:
    """What tools/train.py and the Runner do with `--launcher pytorch`: setup_cpu_distributed,
    then (with CUDA) Runner.setup_env's `init_dist(launcher, **env_cfg.dist_cfg)`."""
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: cuda)
    setup_cpu_distributed(cfg, 'pytorch')
    if cuda:
        monkeypatch.setattr(torch.cuda, 'set_device', lambda index: None)
        # init_dist sets the spawn start method when none is set: keep this process's.
        monkeypatch.setattr(mmengine_dist.mp, 'get_start_method', lambda allow_none=False: 'fork')
        mmengine_dist.init_dist('pytorch', **cfg.env_cfg.dist_cfg)


@pytest.mark.parametrize('cuda, backend', [(False, 'gloo'), (True, 'nccl')])
def test_the_timeout_key_reaches_init_process_group(cuda, backend, init_calls, monkeypatch):
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(backend='nccl', timeout=42))))
    launch(cfg, cuda, monkeypatch)
    assert len(init_calls) == 1
    assert init_calls[0]['backend'] == backend
    assert init_calls[0]['timeout'] == datetime.timedelta(seconds=42)


@pytest.mark.parametrize('cuda, backend', [(False, 'gloo'), (True, 'nccl')])
def test_without_the_key_both_backends_wait_1800_s(cuda, backend, init_calls, monkeypatch):
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(backend='nccl'))))
    launch(cfg, cuda, monkeypatch)
    assert DIST_TIMEOUT_S == 1800 and cfg.env_cfg.dist_cfg.timeout == 1800
    assert [(c['backend'], c['timeout']) for c in init_calls] == [
        (backend, datetime.timedelta(seconds=1800))]


def test_one_process_gets_no_timeout_and_no_process_group(init_calls):
    cfg = Config(dict(env_cfg=dict(dist_cfg=dict(backend='nccl'))))
    setup_cpu_distributed(cfg, 'none')
    assert 'timeout' not in cfg.env_cfg.dist_cfg and init_calls == []


@pytest.mark.parametrize('value', [0, -5, 'long', True])
def test_a_bad_timeout_is_refused(value):
    with pytest.raises(ValueError, match='env_cfg.dist_cfg.timeout must be a positive number '
                                         'of seconds'):
        dist_timeout(Config(dict(env_cfg=dict(dist_cfg=dict(timeout=value)))))
