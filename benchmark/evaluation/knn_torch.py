"""Exact inner-product top-k with torch: the kNN search on a GPU when faiss has no GPU support.

`benchmark.knn.knn_predict(..., backend='torch')` uses it on any device, so the same code path
runs on the CPU in tests against faiss. Queries go in chunks so that one chunk's similarity
block (chunk x N_train) stays under a memory budget; matmuls run in IEEE float32 (no TF32) so
that similarities equal faiss's to ~1e-6.
"""
from contextlib import contextmanager
from typing import Iterator, Tuple

import torch
from torch import Tensor

# Similarity entries per chunk: 2**26 float32 = 256 MiB (N_train = 100,000 -> 671 queries).
MAX_BLOCK_ELEMENTS = 2 ** 26


@contextmanager
def ieee_float32_matmul(device: torch.device) -> Iterator[None]:
    """Full float32 matmuls on `device`'s backend (no TF32 / bf16 passes) inside the block."""
    backend = {'cuda': torch.backends.cuda.matmul,
               'cpu': torch.backends.mkldnn.matmul}.get(device.type)
    if backend is None or not hasattr(backend, 'fp32_precision'):
        yield
        return
    previous = backend.fp32_precision
    backend.fp32_precision = 'ieee'
    try:
        yield
    finally:
        backend.fp32_precision = previous


@torch.no_grad()
def exact_search(train: Tensor, test: Tensor, k: int,
                 max_block: int = MAX_BLOCK_ELEMENTS) -> Tuple[Tensor, Tensor]:
    """The k largest inner products of each query with the training features, best first.

    Args:
        train: Training features (N, D), float32, on the device to search on.
        test: Queries (M, D), float32, same device.
        k: Neighbours per query, 1 <= k <= N.
        max_block: Most similarity entries computed at once (chunk of queries x N).

    Returns:
        sims (M, k) float32 and indices (M, k) int64 into `train`, on the same device, sorted by
        decreasing similarity; among equal similarities the order is torch.topk's.
    """
    if not 1 <= k <= train.shape[0]:
        raise ValueError(f'knn: k must lie in [1, {train.shape[0]}], got {k}')
    rows = max(1, max_block // max(1, train.shape[0]))
    sims, idx = [], []
    with ieee_float32_matmul(train.device):
        for queries in test.split(rows):
            block = queries @ train.t()  # (chunk, N)
            top = block.topk(k, dim=1)  # (chunk, k), sorted
            sims.append(top.values)
            idx.append(top.indices)
    if not sims:  # no queries
        return train.new_empty(0, k), torch.empty(0, k, dtype=torch.long, device=train.device)
    return torch.cat(sims), torch.cat(idx)
