"""benchmark.harness.speed.eval at toy sizes: faiss kNN agrees with lightly's; features time."""
import statistics

import pytest
import torch

from benchmark.harness.speed.eval import bench_features, bench_knn, knn_mismatches
from benchmark.harness.speed.timing import Settings

TINY = Settings(knn_bank=300, knn_queries=40, knn_dim=16, knn_k=20, knn_classes=5,
                knn_chunk=16, knn_repeats=2, threads=1)


def test_bench_knn_runs_and_faiss_agrees_with_lightly():
    import faiss
    gpu = torch.cuda.is_available() and hasattr(faiss, 'StandardGpuResources') \
        and faiss.get_num_gpus() > 0
    result = bench_knn(TINY)
    assert result['device'] == ('cuda' if gpu else 'cpu')
    assert (result['bank'], result['queries'], result['dim'], result['k'], result['classes'],
            result['lightly_chunk']) == (300, 40, 16, 20, 5, 16)
    assert result['mismatches_not_ties'] == 0
    assert result['top1_equal_fraction'] == 1 - result['mismatches'] / 40
    for name in ('faiss', 'lightly', 'matmul'):
        assert len(result['seconds'][name]) == 2
        assert result[f'median_{name}_s'] == statistics.median(result['seconds'][name])
    assert result['matmul_gflops'] == pytest.approx(
        2 * 40 * 300 * 16 / result['median_matmul_s'] / 1e9)


def test_k_is_clamped_to_the_bank():
    from dataclasses import replace
    result = bench_knn(replace(TINY, knn_bank=10, knn_k=50, knn_repeats=1))
    assert result['k'] == 10 and result['mismatches_not_ties'] == 0


def test_knn_mismatches_without_disagreement():
    scores = torch.eye(3, dtype=torch.float64)
    same = torch.tensor([0, 1, 2])
    assert knn_mismatches(scores, same, same.clone(), torch.eye(3), torch.eye(3), k=1) == (0, 0)


def test_bench_features_times_the_extraction_and_its_halves(fake_tiny):
    """End to end, reading alone and the forward alone, 3 rounds each; 8 images at batch 3
    make 3 forwards of 3 images."""
    from benchmark.harness.speed.report import features_line
    s = Settings(depth=18, input_size=16, small_stem=True, feature_images=8, feature_batch=3)
    result = bench_features(s, torch.device('cpu'), fake_tiny)
    assert (result['images'], result['batch'], result['workers']) == (8, 3, 0)
    assert len(result['seconds']) == len(result['read_seconds']) == 3
    assert result['images_per_s'] == 8 / statistics.median(result['seconds'])
    assert result['read_images_per_s'] == 8 / statistics.median(result['read_seconds'])
    assert result['forward_images_per_s'] == 9 / statistics.median(result['forward_seconds'])
    line = features_line(result)
    assert line.startswith('Feature extraction: ') and '16 px, batch 3, 0 loader workers' in line
    assert features_line(dict(images_per_s=2.0)) == 'Feature extraction: 2.0 images/s.'


def test_knn_mismatches_tells_ties_from_errors():
    """Row 0 disagrees on a tie (equal scores), row 1 on a real difference, row 2 agrees."""
    scores = torch.tensor([[2.0, 2.0, 0.0], [3.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    ours, theirs = torch.tensor([0, 0, 2]), torch.tensor([1, 1, 2])
    bank = torch.eye(3)
    queries = torch.tensor([[1.0, 0.5, 0.0], [1.0, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert knn_mismatches(scores, ours, theirs, bank, queries, k=2) == (2, 1)
