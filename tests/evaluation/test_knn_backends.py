"""kNN search backends: torch's exact search (benchmark/knn_torch.py) against faiss, and the
choice between faiss's CPU index, its GPU index and torch on a GPU (benchmark/knn.py)."""
import faiss
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import benchmark.evaluation.knn as knn
from benchmark.evaluation.knn import knn_predict
from benchmark.evaluation.knn_torch import exact_search, ieee_float32_matmul

CUDA = torch.device('cuda', 0)  # a device object only: nothing is allocated on it here


def unit_rows(n, d, seed):
    gen = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, d, generator=gen), dim=1)


def faiss_search(train, test, k):
    index = faiss.IndexFlatIP(train.shape[1])
    index.add(train.numpy())
    sims, idx = index.search(test.numpy(), k)
    return torch.from_numpy(sims), torch.from_numpy(idx)


def assert_same_neighbours(sims_a, idx_a, sims_b, idx_b, tol=1e-5):
    """Scores equal to tol; neighbour sets equal except where a tie (within tol) of the k-th
    similarity lets either search pick a different one of the tied samples."""
    torch.testing.assert_close(sims_a, sims_b, rtol=0, atol=tol)
    for row in range(sims_a.shape[0]):
        kth = min(sims_a[row, -1], sims_b[row, -1])
        sure_a = {int(i) for s, i in zip(sims_a[row], idx_a[row]) if s > kth + tol}
        sure_b = {int(i) for s, i in zip(sims_b[row], idx_b[row]) if s > kth + tol}
        assert sure_a == sure_b, row


@pytest.mark.parametrize('queries', [5, 50])  # faiss: SIMD loop below 20 queries, BLAS above
@pytest.mark.parametrize('k, max_block', [(1, 10 ** 6), (10, 300), (200, 200)])
def test_exact_search_matches_faiss(queries, k, max_block):
    """max_block 300 / 200: chunks of 1 query (and the last chunk partial) over 200 samples."""
    train, test = unit_rows(200, 32, seed=0), unit_rows(queries, 32, seed=1)
    sims, idx = exact_search(train, test, k, max_block=max_block)
    assert sims.dtype == torch.float32 and idx.dtype == torch.int64
    assert sims.shape == idx.shape == (queries, k)
    assert (sims[:, :-1] >= sims[:, 1:]).all()  # best first
    f_sims, f_idx = faiss_search(train, test, k)
    assert_same_neighbours(sims, idx, f_sims, f_idx)
    # and against the float64 definition
    ref = (test.double() @ train.double().t()).topk(k, dim=1).values
    torch.testing.assert_close(sims.double(), ref, rtol=0, atol=1e-6)


def test_exact_search_with_ties_agrees_up_to_ties():
    """Duplicated training rows: tied neighbours may be picked differently, scores may not."""
    base = unit_rows(30, 8, seed=2)
    train, test = torch.cat([base, base, base[:10]]), unit_rows(12, 8, seed=3)
    sims, idx = exact_search(train, test, 7, max_block=100)
    assert_same_neighbours(sims, idx, *faiss_search(train, test, 7))


def test_exact_search_rejects_bad_k():
    with pytest.raises(ValueError, match=r'k must lie in \[1, 5\]'):
        exact_search(unit_rows(5, 4, 0), unit_rows(2, 4, 1), 6)


@pytest.mark.parametrize('k', [1, 20, 500])  # 500 > N_train: clamped, everyone votes
@pytest.mark.parametrize('as_tensor', [False, True])
def test_knn_predict_torch_backend_equals_faiss(monkeypatch, k, as_tensor):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)  # the CPU path, explicitly
    rng = np.random.default_rng(0)
    train = rng.normal(size=(300, 24)).astype(np.float32) * 3  # not normalised
    test = rng.normal(size=(40, 24)).astype(np.float32)
    labels = rng.integers(0, 7, 300)
    if as_tensor:
        train, test, labels = map(torch.from_numpy, (train, test, labels))
    by_faiss = knn_predict(train, labels, test, 7, k=k, temperature=0.1, backend='faiss')
    by_torch = knn_predict(train, labels, test, 7, k=k, temperature=0.1, backend='torch')
    assert by_torch.dtype == torch.float64 and by_torch.device.type == 'cpu'
    torch.testing.assert_close(by_torch, by_faiss, rtol=1e-5, atol=0)
    assert torch.equal(by_torch.argmax(1), by_faiss.argmax(1))
    default = knn_predict(train, labels, test, 7, k=k, temperature=0.1)  # 'auto': faiss on CPU
    assert torch.equal(default, by_faiss)


def test_unknown_backend_is_one_line_error():
    x = unit_rows(4, 3, 0)
    with pytest.raises(ValueError, match=r"^knn: backend 'cuda' not in \('auto', 'faiss', "):
        knn_predict(x, torch.zeros(4, dtype=torch.long), x, 2, backend='cuda')


@pytest.mark.parametrize('backend, gpu, faiss_gpus, k, expected', [
    ('auto', False, 0, 200, ('faiss', None)),       # CPU machine: faiss-cpu
    ('auto', True, 1, 200, ('faiss', CUDA)),        # faiss-gpu installed: its GPU index
    ('auto', True, 0, 200, ('torch', CUDA)),        # GPU, faiss-cpu: torch on the GPU
    ('auto', True, 1, 4096, ('torch', CUDA)),       # beyond faiss's GPU k-selection
    ('faiss', True, 0, 200, ('faiss', None)),       # faiss only: its CPU index
    ('faiss', True, 1, 200, ('faiss', CUDA)),
    ('torch', False, 0, 200, ('torch', torch.device('cpu'))),  # the path the tests compare
    ('torch', True, 1, 200, ('torch', CUDA)),
])
def test_search_plan(monkeypatch, backend, gpu, faiss_gpus, k, expected):
    monkeypatch.setattr(knn, '_faiss_gpus', lambda: faiss_gpus)
    assert knn._plan(backend, CUDA if gpu else None, k) == expected


@pytest.mark.parametrize('use_gpu, cuda, expected', [(None, True, CUDA), (True, True, CUDA),
                                                     (False, True, None), (None, False, None),
                                                     (True, False, None)])
def test_gpu_device_follows_use_gpu_and_cuda(monkeypatch, use_gpu, cuda, expected):
    """CPU features (extract_features returns them on the CPU) still search on a GPU."""
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: cuda)
    monkeypatch.setattr(torch.cuda, 'current_device', lambda: 0)
    assert knn._gpu_device(use_gpu, np.zeros((2, 2)), torch.zeros(2, 2)) == expected


@pytest.mark.parametrize('device_type, backend', [('cpu', torch.backends.mkldnn.matmul),
                                                  ('cuda', torch.backends.cuda.matmul)])
def test_ieee_float32_matmul_sets_and_restores(device_type, backend):
    before = backend.fp32_precision
    backend.fp32_precision = 'tf32'
    try:
        with ieee_float32_matmul(torch.device(device_type)):
            assert backend.fp32_precision == 'ieee'
        assert backend.fp32_precision == 'tf32'
    finally:
        backend.fp32_precision = before


@pytest.mark.cuda
def test_torch_search_on_gpu_equals_faiss_cpu_even_with_tf32_on():
    rng = np.random.default_rng(1)
    train, test = rng.normal(size=(2000, 64)).astype(np.float32), rng.normal(size=(300, 64))
    labels = rng.integers(0, 10, 2000)
    expected = knn_predict(train, labels, test.astype(np.float32), 10, k=50, backend='faiss',
                           use_gpu=False)
    previous = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = 'tf32'
    try:
        scores = knn_predict(torch.from_numpy(train).cuda(), labels,
                             torch.from_numpy(test.astype(np.float32)).cuda(), 10, k=50,
                             backend='torch')
    finally:
        torch.backends.cuda.matmul.fp32_precision = previous
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=0)


@pytest.mark.cuda
def test_feature_extraction_runs_on_the_backbones_device():
    from torch.utils.data import Dataset

    from benchmark.evaluation.features import extract_features

    class Images(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return dict(inputs=torch.full((3, 4, 4), float(i)), data_samples=i)

    seen = []
    backbone = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 5)).cuda()
    backbone.register_forward_pre_hook(lambda mod, args: seen.append(args[0].device.type))
    feats, labels = extract_features(backbone, Images(), batch_size=4, progress=False)
    assert seen == ['cuda', 'cuda'] and feats.device.type == 'cpu' and feats.shape == (6, 5)
