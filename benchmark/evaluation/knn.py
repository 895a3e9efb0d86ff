"""Weighted kNN evaluation of frozen features (InstDisc, Wu et al. 2018), searched with faiss.

The scores follow the InstDisc / lightly / solo-learn definition: the k training samples with the
highest cosine similarity to a test sample each add exp(sim / temperature) to their label's score.
The exact search runs on faiss (its GPU index when faiss has GPU support and sees a GPU), or,
with a GPU but a CPU-only faiss, as chunked matmul + topk in torch on the GPU
(`benchmark.evaluation.knn_torch`); `backend='torch'` selects that path on any device, and
`device` pins the search to one device (tools/eval.py's --device).
"""
from typing import Optional, Tuple, Union

import faiss
import numpy as np
import torch
from torch import Tensor

from benchmark.evaluation.knn_torch import exact_search

ArrayLike = Union[np.ndarray, Tensor]

# faiss's GPU k-selection handles at most this many neighbours (GPU_MAX_SELECTION_K).
_GPU_MAX_K = 2048
BACKENDS = ('auto', 'faiss', 'torch')

# The k rule: InstDisc's k = 200 is 40% of a class on the paper's data with the fewest images
# per class (CIFAR-100 and Tiny-ImageNet: 500), so k is at most that share of the bank's
# smallest class and at most 200: the paper's data keep 200, digits (139 in its smallest
# training class) gets 55. A k beyond a class makes every vote mostly other classes'.
KNN_K_MAX = 200
KNN_K_SHARE = 0.4
KNN_K_RULE = 'min(200, 0.4 x smallest class)'


def knn_k_for(labels: ArrayLike) -> int:
    """The kNN protocol's k for a bank with these labels: min(200, floor(0.4 m)), at least 1,
    where m is the number of images of the bank's smallest class (classes absent from the
    bank do not count)."""
    y = labels.detach().cpu().numpy() if isinstance(labels, Tensor) else np.asarray(labels)
    counts = np.bincount(y.astype(np.int64).ravel()) if y.size else np.zeros(0, np.int64)
    counts = counts[counts > 0]
    if not counts.size:
        raise ValueError('knn: the bank has no labels to choose k from')
    return int(max(1, min(KNN_K_MAX, np.floor(KNN_K_SHARE * counts.min() + 1e-9))))


def _as_features(x: ArrayLike, name: str) -> np.ndarray:
    """Validate features and return them L2-normalised, float32, C-contiguous (what faiss takes).

    Args:
        x: Features of shape (N, D), numpy or torch on any device.
        name: Argument name for error messages.

    Returns:
        Shape (N, D), float32, each row of unit norm (an all-zero row stays zero).
    """
    if isinstance(x, Tensor):
        x = x.detach().to('cpu', torch.float32).numpy()
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f'knn: {name} must have shape (N, D), got {x.shape}')
    if not np.isfinite(x).all():
        raise ValueError(f'knn: {name} contains NaN or inf ({(~np.isfinite(x)).sum()} values); '
                         'the encoder diverged or the features are corrupt')
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    # The clamp keeps an all-zero row at zero (similarity 0 to everything) instead of NaN.
    return np.ascontiguousarray(x / np.maximum(norms, 1e-12))


def _as_labels(y: ArrayLike, n: int, num_classes: int) -> Tensor:
    """Validate labels of shape (n,) with values in [0, num_classes); return int64 on CPU."""
    y = torch.as_tensor(y.detach().cpu() if isinstance(y, Tensor) else np.asarray(y))
    if y.shape != (n,):
        raise ValueError(f'knn: train_labels must have shape ({n},), got {tuple(y.shape)}')
    if y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(f'knn: train_labels must be integers, got {y.dtype}')
    y = y.long()
    if n and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f'knn: train_labels must lie in [0, {num_classes}), '
                         f'got [{int(y.min())}, {int(y.max())}]')
    return y


def _faiss_gpus() -> int:
    """GPUs faiss can use (0 for faiss-cpu)."""
    return faiss.get_num_gpus() if hasattr(faiss, 'StandardGpuResources') else 0


def _gpu_device(use_gpu: Optional[bool], *inputs: ArrayLike,
                device: Optional[Union[str, torch.device]] = None) -> Optional[torch.device]:
    """The CUDA device to search on (an input's, else the current one), or None for the CPU.

    A given `device` decides: 'cpu' means the CPU, a CUDA device that device. Otherwise
    use_gpu=False, or no CUDA device visible to torch, means the CPU; else the GPU: the scores
    are the same either way, only the time differs.
    """
    if device is not None:
        device = torch.device(device)
        if device.type == 'cpu':
            return None
        if device.type != 'cuda' or not torch.cuda.is_available():
            raise ValueError(f"knn: device {str(device)!r} is neither 'cpu' nor a CUDA device "
                             'torch sees')
        return device if device.index is not None else torch.device(
            'cuda', torch.cuda.current_device())
    if use_gpu is False or not torch.cuda.is_available():
        return None
    cuda = [x.device for x in inputs if isinstance(x, Tensor) and x.is_cuda]
    return cuda[0] if cuda else torch.device('cuda', torch.cuda.current_device())


def _plan(backend: str, device: Optional[torch.device],
          k: int) -> Tuple[str, Optional[torch.device]]:
    """Which search runs where: ('faiss', GPU or None for the CPU) or ('torch', device).

    'auto': faiss's GPU index when faiss sees a GPU (and k fits its k-selection), torch's exact
    search on the GPU when faiss has no GPU support, faiss on the CPU without a GPU.
    'faiss': faiss only (its CPU index when it has no GPU). 'torch': torch on `device` or the CPU.
    """
    if backend == 'torch':
        return 'torch', device or torch.device('cpu')
    if device is not None and _faiss_gpus() > 0 and k <= _GPU_MAX_K:
        return 'faiss', device
    if backend == 'faiss' or device is None:
        return 'faiss', None
    return 'torch', device


def _search(train: np.ndarray, test: np.ndarray, k: int,
            device: Optional[int]) -> Tuple[np.ndarray, np.ndarray]:
    """Exact inner-product search.

    Args:
        train: Normalised training features of shape (N_train, D), float32.
        test: Normalised queries of shape (N_test, D), float32.
        k: Neighbours per query.
        device: CUDA device index for a GPU index (k <= 2048), or None for the CPU.

    Returns:
        sims (N_test, k) float32 and indices (N_test, k) int64, best first; -1 marks a
        missing neighbour.
    """
    if device is None:
        index = faiss.IndexFlatIP(train.shape[1])
    else:
        # `res` must outlive the search; it stays referenced until this function returns.
        res = faiss.StandardGpuResources()
        config = faiss.GpuIndexFlatConfig()
        config.device = device
        index = faiss.GpuIndexFlatIP(res, train.shape[1], config)
    index.add(train)
    return index.search(test, k)


def knn_predict(train_features: ArrayLike, train_labels: ArrayLike, test_features: ArrayLike,
                num_classes: int, k: int = 200, temperature: float = 0.1,
                use_gpu: Optional[bool] = None, backend: str = 'auto',
                device: Optional[Union[str, torch.device]] = None) -> Tensor:
    """Weighted kNN class scores (InstDisc), exact cosine search with faiss or torch.

    Args:
        train_features: Shape (N_train, D), numpy or torch on any device; need not be normalised.
        train_labels: Shape (N_train,), integers in [0, num_classes).
        test_features: Shape (N_test, D).
        num_classes: Number of classes C.
        k: Neighbours that vote; clamped to N_train.
        temperature: Vote weight is exp(cosine similarity / temperature).
        use_gpu: None or True search on a GPU whenever torch sees one (an input's CUDA device,
            else the current one); False forces the CPU.
        backend: 'auto' (faiss; torch on a GPU that faiss cannot use), 'faiss' or 'torch'
            (torch's exact search on the chosen device, also the CPU); see `_plan`.
        device: Where to search, overriding `use_gpu`: 'cpu' (faiss's CPU index, or torch's
            search on the CPU with backend='torch') or a CUDA device ('cuda', 'cuda:1').

    Returns:
        Scores of shape (N_test, C), float64 on CPU: score[i, c] = sum over the k nearest
        training samples j of test sample i with label c of exp(sim_ij / temperature).
        float64 because exp(1 / temperature) overflows float32 for temperature < 0.012.

    Raises:
        ValueError: On NaN/inf features, mismatched shapes, labels out of range or an
            unknown backend.
    """
    if temperature <= 0 or k < 1 or num_classes < 1:
        raise ValueError(f'knn: need temperature > 0, k >= 1, num_classes >= 1; '
                         f'got {temperature}, {k}, {num_classes}')
    if backend not in BACKENDS:
        raise ValueError(f'knn: backend {backend!r} not in {BACKENDS}')
    device = _gpu_device(use_gpu, train_features, test_features, device=device)
    train = _as_features(train_features, 'train_features')
    test = _as_features(test_features, 'test_features')
    if train.shape[0] == 0 or train.shape[1] != test.shape[1]:
        raise ValueError(f'knn: train_features {train.shape} and test_features {test.shape} '
                         'must be non-empty with the same feature dimension')
    labels = _as_labels(train_labels, train.shape[0], num_classes)
    k = min(k, train.shape[0])
    search, device = _plan(backend, device, k)
    if search == 'torch':
        sims, idx = exact_search(torch.from_numpy(train).to(device),
                                 torch.from_numpy(test).to(device), k)
        sims, idx = sims.double().cpu(), idx.cpu()  # N_test x k
    else:
        sims, idx = _search(train, test, k, None if device is None else device.index)
        sims, idx = torch.from_numpy(sims).double(), torch.from_numpy(idx).long()  # N_test x k
    found = idx >= 0  # faiss pads with -1 when it has fewer than k results
    weights = torch.where(found, (sims / temperature).exp(), torch.zeros_like(sims))
    votes = labels[idx.clamp(min=0)]  # N_test x k; padded slots vote with weight 0
    scores = torch.zeros(test.shape[0], num_classes, dtype=torch.float64)
    return scores.scatter_add_(1, votes, weights)  # N_test x C
