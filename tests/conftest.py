"""Shared fixtures: the repo root, a free TCP port, and a small fake Tiny-ImageNet."""
import os
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@pytest.fixture
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@pytest.fixture(scope='session')
def fake_tiny(tmp_path_factory) -> str:
    from benchmark.data.fakes import make_fake_tiny_imagenet
    return str(make_fake_tiny_imagenet(tmp_path_factory.mktemp('data'),
                                       num_classes=4, train_per_class=8, val_per_class=2))


@pytest.fixture
def subprocess_env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS='1', PYTHONWARNINGS='ignore',
               WANDB_MODE='disabled')
    env.pop('WANDB_API_KEY', None)
    return env
