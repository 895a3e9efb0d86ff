"""The evaluation's device: checked before any work, and the same device reaches every stage
(feature extraction, kNN, the fast linear probe) of `evaluate_checkpoint`. On the CPU, through
the code path a GPU takes."""
import numpy as np
import pytest
import torch

import benchmark.components  # noqa: F401  registers the datasets
from benchmark.engine.config_file import read_config
from benchmark.evaluation import evaluate, protocols
from benchmark.evaluation.device import eval_device, parse_device
from benchmark.evaluation.knn import knn_predict
from benchmark.evaluation.linear_fast import train_linear_probe
from tests.conftest import ROOT, tiny_backbone


def test_eval_device_defaults_to_cuda_only_when_torch_sees_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert eval_device() == torch.device('cpu') == eval_device('cpu')
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)
    assert eval_device() == torch.device('cuda') and eval_device('cuda:1').index == 1


@pytest.mark.parametrize('name, words', [
    ('cuda', "device 'cuda': torch sees no CUDA device here; use 'cpu'"),
    ('cuda:0', "device 'cuda:0': torch sees no CUDA device here; use 'cpu'"),
    ('gpu', "device 'gpu' is not a device; use 'cpu', 'cuda' or 'cuda:N'"),
    ('mps', "device 'mps': evaluation runs on 'cpu', 'cuda' or 'cuda:N'"),
])
def test_bad_devices_are_one_line_errors(monkeypatch, name, words):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    with pytest.raises(ValueError) as info:
        eval_device(name)
    assert str(info.value) == words


def test_a_cuda_index_beyond_the_visible_devices_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)
    with pytest.raises(ValueError, match=r'torch sees 2 CUDA device\(s\), cuda:0 to cuda:1'):
        eval_device('cuda:2')


def test_parse_device_checks_the_spelling_only():
    """A suite names the device of a GPU node while it is checked on a login node."""
    assert parse_device('cuda:3') == torch.device('cuda', 3)
    with pytest.raises(ValueError, match='is not a device'):
        parse_device('cuda:x')


def test_knn_and_probe_on_an_explicit_cpu_equal_their_defaults():
    rng = np.random.default_rng(0)
    x_tr, x_te = rng.normal(size=(60, 8)).astype(np.float32), rng.normal(size=(20, 8))
    y_tr, y_te = rng.integers(0, 3, 60), rng.integers(0, 3, 20)
    torch.testing.assert_close(knn_predict(x_tr, y_tr, x_te, 3, k=5, device='cpu'),
                               knn_predict(x_tr, y_tr, x_te, 3, k=5, use_gpu=False))
    by_torch = knn_predict(x_tr, y_tr, x_te, 3, k=5, device=torch.device('cpu'), backend='torch')
    torch.testing.assert_close(by_torch, knn_predict(x_tr, y_tr, x_te, 3, k=5, use_gpu=False),
                               rtol=1e-5, atol=0)  # torch's float32 sums vs faiss's
    assert (train_linear_probe(x_tr, y_tr, x_te, y_te, 3, epochs=3, device='cpu')
            == train_linear_probe(x_tr, y_tr, x_te, y_te, 3, epochs=3))


def test_knn_refuses_a_device_it_cannot_search_on(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    x = np.eye(4, dtype=np.float32)
    with pytest.raises(ValueError, match="knn: device 'cuda' is neither 'cpu' nor a CUDA device"):
        knn_predict(x, np.arange(4), x, 4, k=1, device='cuda')


def test_the_device_reaches_every_stage(monkeypatch):
    """evaluate_checkpoint(device='cpu'): the backbone is moved there, and feature extraction,
    kNN and the fast linear probe each receive it (each stage wrapped, then run for real)."""
    seen = {}

    def spy(name, fn):
        def wrapped(*args, device=None, **kwargs):
            seen.setdefault(name, []).append(device)
            return fn(*args, device=device, **kwargs)
        return wrapped

    real_extract = spy('extract_features', evaluate.extract_features)

    def extract(backbone, *args, device=None, **kwargs):
        seen.setdefault('backbone', []).append(next(backbone.parameters()).device)
        return real_extract(backbone, *args, device=device, **kwargs)

    monkeypatch.setattr(evaluate, 'build_resnet', tiny_backbone)  # the path, not ResNet's numbers
    monkeypatch.setattr(evaluate, 'extract_features', extract)
    monkeypatch.setattr(protocols, 'knn_predict', spy('knn', protocols.knn_predict))
    monkeypatch.setattr(protocols, 'train_linear_probe',
                        spy('linear_fast', protocols.train_linear_probe))
    cfg = read_config(str(ROOT / 'configs' / 'mocov2_r18_digits.py'))
    out = evaluate.evaluate_checkpoint(cfg, 'random', ['knn', 'linear_fast'], num_workers=0,
                                       batch_size=512, device='cpu')
    cpu = torch.device('cpu')
    assert seen == {'backbone': [cpu, cpu], 'extract_features': [cpu, cpu], 'knn': [cpu],
                    'linear_fast': [cpu]}
    assert set(out['protocols']) == {'knn', 'linear_fast'}
    assert all(isinstance(e['metrics']['top1'], float) for e in out['protocols'].values())


def test_a_bad_device_fails_before_the_backbone_is_built(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    monkeypatch.setattr(evaluate, 'build_resnet', lambda **kw: pytest.fail('built a backbone'))
    cfg = read_config(str(ROOT / 'configs' / 'mocov2_r18_digits.py'))
    with pytest.raises(ValueError, match="device 'cuda': torch sees no CUDA device"):
        evaluate.evaluate_checkpoint(cfg, 'random', ['knn'], device='cuda')
