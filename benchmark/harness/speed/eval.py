"""Speed of evaluation: feature extraction through the backbone, and faiss kNN against lightly's
kNN and the bare matrix product (the BLAS floor)."""
import math
import statistics
from typing import Dict, List

import torch
import torch.nn.functional as F

from benchmark.harness.speed.timing import Settings, in_turn, timed


def bench_features(s: Settings, device: torch.device, data_root: str) -> dict:
    """Images/s of extract_features at batch s.feature_batch (files decoded in the test view,
    forward, features back on the CPU), beside its two halves measured alone: reading the
    batches (decode + test view through the DataLoader, s.num_workers workers, default 0) and
    the backbone's forward on a batch already on `device`. The three run in turn, 3 rounds.

    The halves bound what another device can gain: a faster forward leaves the reading as it is
    (unless more loader workers share it).
    """
    from torch.utils.data import DataLoader, Subset

    from benchmark.data import TinyImageNet
    from benchmark.evaluation.features import extract_features
    from methods.backbones import build_resnet
    workers, batch = s.num_workers or 0, s.feature_batch
    dataset = TinyImageNet(data_root, 'train', s.input_size, view='test')
    dataset = Subset(dataset, range(min(s.feature_images, len(dataset))))
    backbone = build_resnet(s.depth, s.small_stem).to(device).eval()
    inputs = torch.randn(batch, 3, s.input_size, s.input_size, generator=torch.Generator()
                         .manual_seed(0)).to(device)
    forwards = math.ceil(len(dataset) / batch)  # as many images as the extraction's

    def extract():
        extract_features(backbone, dataset, batch, workers, progress=False)

    def read():
        for _ in DataLoader(dataset, batch_size=batch, num_workers=workers):
            pass

    @torch.no_grad()
    def forward():
        for _ in range(forwards):
            backbone(inputs)

    extract_features(backbone, Subset(dataset, range(8)), progress=False)  # warm-up
    forward()
    times: Dict[str, List[float]] = dict(extract=[], read=[], forward=[])
    for r in range(3):
        for name, fn in in_turn([('extract', extract), ('read', read), ('forward', forward)], r):
            times[name].append(timed(fn, device))
    n = len(dataset)
    return dict(images=n, batch=batch, input_size=s.input_size, depth=s.depth,
                small_stem=s.small_stem, workers=workers, device=str(device),
                torch_threads=torch.get_num_threads(), seconds=times['extract'],
                read_seconds=times['read'], forward_seconds=times['forward'],
                images_per_s=n / statistics.median(times['extract']),
                read_images_per_s=n / statistics.median(times['read']),
                forward_images_per_s=forwards * batch / statistics.median(times['forward']))


def knn_mismatches(scores, ours, theirs, bank, queries, k: int) -> tuple:
    """(mismatched top-1 rows, those not explained by a tie).

    A mismatch is a tie when the two classes' scores are within 1e-5 (relative), or when the
    k-th and (k+1)-th similarities of the query are within 1e-5 (the neighbour sets may differ
    by rounding).
    """
    rows = (ours != theirs).nonzero().flatten()
    if rows.numel() == 0:
        return 0, 0
    s_ours, s_theirs = scores[rows, ours[rows]], scores[rows, theirs[rows]]
    tie = (s_ours - s_theirs).abs() <= 1e-5 * s_ours.abs()
    if k < bank.shape[0]:
        top = (queries[rows] @ bank.t()).topk(k + 1, dim=1).values  # (n, k + 1)
        tie |= (top[:, k - 1] - top[:, k] <= 1e-5).to(tie.device)
    return int(rows.numel()), int((~tie).sum())


def bench_knn(s: Settings) -> dict:
    """Our faiss knn_predict vs lightly's torch knn_predict vs queries @ bank.T, alternating."""
    import faiss
    from lightly.utils.benchmarking import knn_predict as lightly_knn

    from benchmark.evaluation.knn import knn_predict
    # knn_predict searches on a GPU whenever there is one: faiss's GPU index, else torch's exact
    # search (faiss-cpu); so all three run on the GPU when there is one, else on the CPU.
    gpu = torch.cuda.is_available()
    faiss_gpu = gpu and hasattr(faiss, 'StandardGpuResources') and faiss.get_num_gpus() > 0
    search = ('faiss-gpu' if faiss_gpu else 'torch') if gpu else 'faiss-cpu'
    device = torch.device('cuda' if gpu else 'cpu')
    faiss.omp_set_num_threads(torch.get_num_threads())
    gen = torch.Generator().manual_seed(0)
    bank = F.normalize(torch.randn(s.knn_bank, s.knn_dim, generator=gen), dim=1).to(device)
    queries = F.normalize(torch.randn(s.knn_queries, s.knn_dim, generator=gen), dim=1).to(device)
    labels = torch.randint(s.knn_classes, (s.knn_bank,), generator=gen).to(device)
    k, product = min(s.knn_k, s.knn_bank), torch.empty(s.knn_queries, s.knn_bank, device=device)
    res = {}

    def ours(q=queries):
        res['scores'] = knn_predict(bank, labels, q, s.knn_classes, k)
        res['ours'] = res['scores'].argmax(1)

    def theirs(q=queries):  # lightly's module calls it batch by batch; so do we (memory)
        res['theirs'] = torch.cat([lightly_knn(c, bank.t(), labels, s.knn_classes, k)[:, 0]
                                   for c in q.split(s.knn_chunk)]).cpu()

    def matmul():
        torch.mm(queries, bank.t(), out=product)

    ours(queries[:s.knn_chunk]), theirs(queries[:s.knn_chunk]), matmul()  # warm-up
    times: Dict[str, List[float]] = dict(faiss=[], lightly=[], matmul=[])
    for r in range(s.knn_repeats):
        for name, fn in in_turn([('faiss', ours), ('lightly', theirs), ('matmul', matmul)], r):
            times[name].append(timed(fn, device))
    del product
    mismatched, unexplained = knn_mismatches(res['scores'], res['ours'], res['theirs'],
                                             bank.cpu(), queries.cpu(), k)
    matmul_s = statistics.median(times['matmul'])
    return dict(device=str(device), search=search, faiss_threads=faiss.omp_get_max_threads(),
                torch_threads=torch.get_num_threads(), bank=s.knn_bank, queries=s.knn_queries,
                dim=s.knn_dim, k=k, classes=s.knn_classes, lightly_chunk=s.knn_chunk,
                seconds=times, **{f'median_{n}_s': statistics.median(v) for n, v in times.items()},
                matmul_gflops=2 * s.knn_queries * s.knn_bank * s.knn_dim / matmul_s / 1e9,
                top1_equal_fraction=1 - mismatched / s.knn_queries, mismatches=mismatched,
                mismatches_not_ties=unexplained)
