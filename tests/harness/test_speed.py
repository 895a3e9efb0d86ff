"""tools/benchmark_speed.py: the memory measure, the ratios, and one tiny end-to-end run."""
import json
import math
import subprocess
import sys

import pytest
import torch

from benchmark.harness.speed import (
    HEADLINE,
    cpu_peak_growth,
    knn_mismatches,
    paired_ratio,
)
from tests.conftest import ROOT

TINY = ['--input-size', '16', '--batch', '4', '--repeats', '2', '--warmup', '1',
        '--pipeline-rounds', '1', '--pipeline-iters', '2', '--pipeline-warmup', '1',
        '--num-workers', '0', '--feature-images', '8', '--knn-bank', '500', '--knn-queries', '64',
        '--knn-k', '20', '--knn-classes', '10', '--knn-chunk', '16', '--knn-repeats', '1']


def test_cpu_peak_growth_counts_live_tensor_bytes():
    """Two 4 MB tensors alive at once, then one freed before a third: the peak is 8 MB exactly."""
    def fn():
        a, b = torch.empty(10**6), torch.empty(10**6)  # float32: 4,000,000 bytes each
        del a
        c = torch.empty(10**6)
        del b, c

    cpu_peak_growth(fn)  # first profiler session initialises the profiler
    assert cpu_peak_growth(fn) == 8_000_000


def test_paired_ratio_cancels_drift():
    """The machine slows 3x between rounds; each round's adjacent pair still says 1.25."""
    assert paired_ratio([1.25, 3.75, 2.5], [1.0, 3.0, 2.0]) == pytest.approx(1.25)


def test_knn_mismatches_tells_ties_from_errors():
    """Row 0 disagrees on a tie (equal scores), row 1 on a real difference, row 2 agrees."""
    scores = torch.tensor([[2.0, 2.0, 0.0], [3.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    ours, theirs = torch.tensor([0, 0, 2]), torch.tensor([1, 1, 2])
    bank = torch.eye(3)
    queries = torch.tensor([[1.0, 0.5, 0.0], [1.0, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert knn_mismatches(scores, ours, theirs, bank, queries, k=2) == (2, 1)


def test_odd_batch_is_one_line_error(subprocess_env):
    proc = subprocess.run([sys.executable, 'tools/benchmark_speed.py', '--batch', '5'], cwd=ROOT,
                          env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith('error: benchmark_speed: ')
    assert '--batch=5' in proc.stderr


@pytest.mark.slow
def test_tiny_run_writes_json_and_table(tmp_path, subprocess_env):
    """Every part runs at the tiniest sizes; the numbers are sane (no assertion on speed)."""
    out, table = tmp_path / 'speed.json', tmp_path / 'speed.md'
    proc = subprocess.run([sys.executable, 'tools/benchmark_speed.py', *TINY, '--out', str(out),
                           '--table', str(table)], cwd=ROOT, env=subprocess_env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(HEADLINE) | {'device', 'memory_kind', 'steps', 'pipeline', 'features', 'knn'} \
        <= set(result)
    for key in HEADLINE:
        if key != 'faiss_same_predictions':
            assert math.isfinite(result[key]) and result[key] > 0, key
    assert result['faiss_same_predictions'] is True
    assert result['knn']['top1_equal_fraction'] == 1.0
    steps = result['steps']
    for method in ('mocov2', 'mixco', 'simclr', 'mixco_simclr'):
        assert steps[method]['images_per_s'] > 0
        assert steps[method]['peak_bytes'] > steps[method]['own_bytes'] > 0
    # Same weights, optimizer state and inputs; MixCo's 1.5 B forward can only add activations.
    assert steps['mixco']['own_bytes'] == steps['mocov2']['own_bytes']
    assert steps['mixco']['step_peak_growth_bytes'] >= steps['mocov2']['step_peak_growth_bytes']
    assert steps['mocov2']['own_bytes'] > steps['simclr']['own_bytes']  # key encoder + queue
    assert {'mocov2', 'mixco'} == set(result['pipeline'])
    assert all(0 <= p['median_data_wait_fraction'] < 1 for p in result['pipeline'].values())
    assert result['features']['images'] == 8 and result['features']['images_per_s'] > 0
    text = table.read_text()
    assert '| MixCo (MoCo-v2) | O |' in text and '| MoCo-v2 | X |' in text
    assert proc.stdout.strip().splitlines()[-1].startswith('knn_over_matmul: ')
