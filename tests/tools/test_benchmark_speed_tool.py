"""tools/benchmark_speed.py in-process at the tiniest sizes: the files it writes, named by the
device, and what it prints."""
import json

import pytest
import torch

from benchmark.harness.speed.bench import PARTS
from tools import benchmark_speed

TINY = ['--input-size', '16', '--batch', '4', '--repeats', '2', '--warmup', '1',
        '--pipeline-rounds', '1', '--pipeline-iters', '2', '--pipeline-warmup', '1',
        '--num-workers', '0', '--feature-images', '8', '--knn-bank', '500', '--knn-queries', '64',
        '--knn-k', '20', '--knn-classes', '10', '--knn-chunk', '16', '--knn-repeats', '1',
        '--views-native', '16', '--views-repeats', '1']


@pytest.fixture(autouse=True)
def torch_threads():
    """The harness sets torch's thread count for its process; the next tests get theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_only_views_writes_results_named_by_the_device(tmp_path, run_main):
    code, out, err, _ = run_main(benchmark_speed, *TINY, '--only', 'views', '--out-dir', tmp_path)
    assert code == 0, err[-3000:]
    slug = 'nvidia' if torch.cuda.is_available() else 'cpu-'
    (stem,) = [p.stem for p in tmp_path.glob('*.json')]
    assert stem.startswith(slug) and (tmp_path / f'{stem}.md').is_file()
    result = json.loads((tmp_path / f'{stem}.json').read_text())
    assert set(PARTS) & set(result) == {'views'} and result['device_slug'] == stem
    assert result['views']['ms_per_batch']['device_path'] > 0
    assert len(result['load_average']['start']) == 3 and 'Host load average' in out
    assert 'Views (4 images 16 px -> 2 views 16 px' in out

