"""tools/benchmark_speed.py and benchmark.harness.speed.bench: the family's ratios and floors, the
command line's errors, and tiny end-to-end runs of the default harness and of --paper."""
import json
import math
import subprocess
import sys
import time

import pytest
import torch

from benchmark.harness.speed import bench as speed
from benchmark.harness.speed.bench import (HEADLINE, PARTS, bench_steps, compile_speedup, paper_keys,
                                     step_ratios)
from benchmark.harness.speed.step import PAIRS
from benchmark.harness.speed.timing import Settings
from tests.conftest import ROOT

TINY = ['--input-size', '16', '--batch', '4', '--repeats', '2', '--warmup', '1',
        '--pipeline-rounds', '1', '--pipeline-iters', '2', '--pipeline-warmup', '1',
        '--num-workers', '0', '--feature-images', '8', '--knn-bank', '500', '--knn-queries', '64',
        '--knn-k', '20', '--knn-classes', '10', '--knn-chunk', '16', '--knn-repeats', '1',
        '--views-native', '16', '--views-repeats', '1']


def tool(args, env, timeout=600):
    return subprocess.run([sys.executable, 'tools/benchmark_speed.py', *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_step_ratios_pair_each_member_with_its_baseline():
    """Hand-made step records: MixCo's steps take 1.5x, 2x, 1.5x MoCo-v2's adjacent ones."""
    base = dict(step_seconds=[1.0, 2.0, 4.0], peak_bytes=100, step_peak_growth_bytes=40,
                flops_per_image=4.0)
    steps = {m: dict(base) for m in ('mocov2', 'imix', 'unmix', 'mochi', 'simclr', 'mixco_simclr')}
    steps['mixco'] = dict(step_seconds=[1.5, 4.0, 6.0], peak_bytes=130, step_peak_growth_bytes=70,
                          flops_per_image=5.5)
    out = step_ratios(steps)
    assert out['mixco_moco_time_ratio'] == 1.5  # median of 1.5, 2, 1.5
    assert out['mixco_moco_memory_ratio'] == 1.3 and out['mixco_moco_step_growth_ratio'] == 1.75
    assert out['mixco_moco_floor_flops'] == 5.5 / 4.0
    assert out['mixco_moco_floor_passes'] == 1.375 and out['unmix_moco_floor_passes'] == 1.75
    assert out['imix_moco_time_ratio'] == 1.0 and out['mixco_simclr_floor_passes'] == 1.5
    assert {k.rsplit('_', 2)[0] for k in out if k.endswith('_floor_flops')} == set(PAIRS)


def test_bench_steps_times_and_counts_each_member():
    s = Settings(input_size=16, batch=4, small_stem=True, repeats=2, warmup=0)
    steps = bench_steps(s, torch.device('cpu'), methods=('mocov2', 'mixco'))
    for m in ('mocov2', 'mixco'):
        r = steps[m]
        assert len(r['step_seconds']) == 2 and r['images_per_s'] == 4 / r['seconds_per_step']
        assert r['peak_bytes'] == r['own_bytes'] + r['step_peak_growth_bytes']
        assert r['tflops'] == pytest.approx(r['images_per_s'] * r['flops_per_image'] / 1e12)
        assert r['peak_fraction'] is None  # no peak known for a CPU
    # MixCo's extra B/2 mixed queries (forward + backward) and its mix logits: about 11/8 as much
    ratio = steps['mixco']['flops_per_image'] / steps['mocov2']['flops_per_image']
    assert 1.3 < ratio < 1.5


def test_paper_keys_take_the_configuration_where_mixco_is_fastest():
    def config(mixco_ips, wait):
        mixco = dict(median_images_per_s=mixco_ips, median_data_wait_fraction=wait, bound='data',
                     tflops=1.0, peak_fraction=None, floor_images_per_s=None)
        return dict(methods=dict(mixco=mixco, mocov2=dict(median_images_per_s=2 * mixco_ips)),
                    time_ratio=mixco_ips / 100, memory_ratio=1.2)
    out = paper_keys({'pil-fp32': config(50, 0.5), 'gpu-bf16-cl': config(80, 0.1)})
    assert out['paper_setting_config'] == 'gpu-bf16-cl'
    assert (out['paper_setting_images_per_s'], out['paper_setting_mocov2_images_per_s'],
            out['paper_setting_data_wait'], out['paper_setting_time_ratio']) == (80, 160, 0.1, 0.8)


def test_compile_speedup_pairs_each_compiled_configuration_with_its_eager_one():
    def config(mixco_ips):
        return dict(methods=dict(mixco=dict(median_images_per_s=mixco_ips)))
    grid = {'pil-fp32': config(10), 'gpu-bf16-cl': config(40), 'gpu-bf16-cl-compile': config(50),
            'gpu-fp32-compile': config(30)}  # no eager gpu-fp32: nothing to pair with
    assert compile_speedup(grid) == dict(compile_speedup={'gpu-bf16-cl': 1.25})
    assert compile_speedup({'pil-fp32': config(10)}) == {}


@pytest.mark.parametrize('args, needle', [
    (['--batch', '5'], '--batch=5'),
    (['--configs', 'gpu-fp16'], "'gpu-fp16'"),
    (['--paper', '--images', '64', '--batch', '8', '--pipeline-iters', '4'], 'raise --images'),
    (['--images', '0'], '--images=0')])
def test_bad_arguments_are_one_line_errors(subprocess_env, args, needle):
    proc = tool(args, subprocess_env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith('error: benchmark_speed: ')
    assert needle in proc.stderr


def test_only_views_writes_results_named_by_the_device(tmp_path, subprocess_env):
    proc = tool([*TINY, '--only', 'views', '--out-dir', str(tmp_path)], subprocess_env, 300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    slug = 'nvidia' if torch.cuda.is_available() else 'cpu-'
    (stem,) = [p.stem for p in tmp_path.glob('*.json')]
    assert stem.startswith(slug) and (tmp_path / f'{stem}.md').is_file()
    result = json.loads((tmp_path / f'{stem}.json').read_text())
    assert set(PARTS) & set(result) == {'views'} and result['device_slug'] == stem
    assert result['views']['ms_per_batch']['device_path'] > 0
    assert len(result['load_average']['start']) == 3 and 'Host load average' in proc.stdout
    assert 'Views (4 images 16 px -> 2 views 16 px' in proc.stdout


@pytest.mark.slow
def test_tiny_run_writes_json_and_table(tmp_path, subprocess_env):
    """Every part runs at the tiniest sizes; the numbers are sane (no assertion on speed)."""
    out, table = tmp_path / 'speed.json', tmp_path / 'speed.md'
    proc = tool([*TINY, '--out', str(out), '--table', str(table)], subprocess_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    conditional = {k for k in HEADLINE if k.startswith('paper_')} | {'compile_speedup'}
    assert set(HEADLINE) - conditional <= set(result)
    assert set(PARTS) - {'step'} | {'steps', 'device', 'memory_kind'} <= set(result)
    for key in HEADLINE:
        if key in result and key not in ('faiss_same_predictions',):
            assert math.isfinite(result[key]) and result[key] > 0, key
    assert result['faiss_same_predictions'] is True
    steps = result['steps']
    for method in ('mocov2', 'mixco', 'imix', 'unmix', 'mochi', 'simclr', 'mixco_simclr'):
        assert steps[method]['images_per_s'] > 0 and steps[method]['flops_per_image'] > 0
        assert steps[method]['peak_bytes'] > steps[method]['own_bytes'] > 0
    # Same weights, optimizer state and inputs; MixCo's 1.5 B forward can only add activations.
    assert steps['mixco']['own_bytes'] == steps['mocov2']['own_bytes']
    assert steps['mocov2']['own_bytes'] > steps['simclr']['own_bytes']  # key encoder + queue
    (config,) = result['pipeline'].values()
    assert list(result['pipeline']) == ['pil-fp32'] and set(config['methods']) == {'mocov2', 'mixco'}
    assert all(0 <= p['median_data_wait_fraction'] < 1 for p in config['methods'].values())
    assert result['features']['images'] == 8 and result['views']['batch'] == 4
    text = table.read_text()
    assert '| MixCo (MoCo-v2) | MoCo-v2 |' in text and '| pil-fp32 | MoCo-v2 |' in text
    assert '| Un-Mix (MoCo-v2) | MoCo-v2 |' in text and 'Paper setting' not in text
    assert proc.stdout.strip().splitlines()[-1].startswith('knn_over_matmul: ')


@pytest.mark.slow
def test_tiny_paper_run_measures_the_grid(tmp_path, subprocess_env):
    proc = tool(['--paper', '--images', '64', '--input-size', '32', '--batch', '8',
                 '--pipeline-iters', '4', '--pipeline-warmup', '2', '--num-workers', '0',
                 '--repeats', '2', '--warmup', '1', '--skip', 'features', 'knn', 'views',
                 '--data-dir', str(tmp_path / 'data'), '--out-dir', str(tmp_path)],
                subprocess_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = tmp_path.glob('*.json')
    result = json.loads(path.read_text())
    assert list(result['pipeline']) == ['pil-fp32', 'pil-bf16-cl', 'gpu-fp32', 'gpu-bf16-cl',
                                        'gpu-bf16-cl-compile']
    assert list(result['compile_speedup']) == ['gpu-bf16-cl']  # measured, whichever way it goes
    settings = result['settings']
    assert (settings['depth'], settings['input_size'], settings['batch']) == (18, 32, 8)
    for config in result['pipeline'].values():
        for p in config['methods'].values():
            assert p['iterations'] == 6 and p['images_per_s'] and p['flops_per_image'] > 0
        assert config['time_ratio'] > 0 and config['memory_ratio'] > 0
    fastest = max(result['pipeline'].values(),
                  key=lambda c: c['methods']['mixco']['median_images_per_s'])
    assert result['paper_setting_images_per_s'] == fastest['methods']['mixco'][
        'median_images_per_s']
    assert 0 <= result['paper_setting_data_wait'] < 1 and result['mixco_moco_time_ratio'] > 0
    assert result['device'] and (tmp_path / 'data').is_dir()
    assert 'Paper setting, fastest configuration' in proc.stdout
    assert 'gpu-bf16-cl-compile: MixCo ' in proc.stderr  # each configuration logged as it ends
    assert 'paper_setting_images_per_s: ' in proc.stdout


def test_run_saves_the_result_so_far_after_each_part(monkeypatch, tmp_path):
    """A run cut short (a GPU job's time limit) keeps each finished part: run() hands save() the
    result so far, marked partial, after the steps, each pipeline configuration, the features
    and kNN; the result it returns is whole and unmarked. Every part is a stub here."""
    def pipeline(c, device, data_root, tmp, flops, peak, tag):
        m = dict(median_images_per_s=2.0 if tag.startswith('gpu') else 1.0, median_data_wait_fraction=0.0,
                 median_efficiency=1.0, bound='compute')
        return dict(methods=dict(mixco=m, mocov2=m), time_ratio=1.2, memory_ratio=1.0)

    monkeypatch.setattr(speed, 'fake_data', lambda s, tmp: tmp)
    monkeypatch.setattr(speed, 'bench_steps', lambda s, device: dict(
        mocov2=dict(flops_per_image=1.0), mixco=dict(flops_per_image=1.5)))
    monkeypatch.setattr(speed, 'step_ratios', lambda steps: dict(mixco_moco_time_ratio=1.3))
    monkeypatch.setattr(speed, 'bench_pipeline', pipeline)
    monkeypatch.setattr(speed, 'bench_features', lambda s, device, root: dict(images_per_s=1.0))
    monkeypatch.setattr(speed, 'bench_knn', lambda s: dict(
        seconds=dict(lightly=[2.0], faiss=[1.0], matmul=[1.0]), mismatches_not_ties=0))
    monkeypatch.setattr(speed, 'bench_views', lambda s, device: dict(views=1))
    saves = []  # serialised at once, as tools/benchmark_speed.py writes them
    s = Settings(configs=['pil-fp32', 'gpu-fp32'], paper=True)
    result = speed.run(s, log=lambda msg: None, save=lambda r: saves.append(json.dumps(r)))
    saves = [json.loads(r) for r in saves]
    assert [r['partial']['done'] for r in saves] == [
        'step', 'pipeline pil-fp32', 'pipeline pil-fp32, gpu-fp32', 'features', 'knn']
    assert [list(r.get('pipeline', ())) for r in saves] == [
        [], ['pil-fp32'], ['pil-fp32', 'gpu-fp32'], ['pil-fp32', 'gpu-fp32'],
        ['pil-fp32', 'gpu-fp32']]
    assert saves[0]['mixco_moco_time_ratio'] == 1.3 and 'features' in saves[3]
    assert 'views' not in saves[-1] and saves[-1]['faiss_same_predictions'] is True
    assert 'partial' not in result and result['views'] == dict(views=1)
    assert result['paper_setting_config'] == 'gpu-fp32'


@pytest.mark.slow
def test_a_run_stopped_midway_leaves_the_parts_it_measured(tmp_path, subprocess_env):
    """SIGKILL after the first pipeline configuration is logged (it is saved before): the JSON and
    table on disk hold it, marked partial (a tools/gpu_proof.sh run cut short keeps what its
    OUTPUT_DIR has by then)."""
    proc = subprocess.Popen(
        [sys.executable, 'tools/benchmark_speed.py', '--paper', '--images', '32',
         '--input-size', '16', '--batch', '4', '--pipeline-iters', '2', '--pipeline-warmup', '1',
         '--num-workers', '0', '--configs', 'pil-fp32', 'gpu-fp32', '--skip', 'step',
         '--out-dir', str(tmp_path)], cwd=ROOT, env=subprocess_env, stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 600
        for line in proc.stderr:
            if line.startswith('  pil-fp32: MixCo') or time.monotonic() > deadline:
                break
        proc.kill()
    finally:
        proc.wait()
    assert proc.returncode == -9  # killed, not ended
    (path,) = tmp_path.glob('*.json')
    result = json.loads(path.read_text())
    assert result['partial']['done'] == 'pipeline pil-fp32'
    assert list(result['pipeline']) == ['pil-fp32'] and 'features' not in result
    text = path.with_suffix('.md').read_text()
    assert 'Partial: written after pipeline pil-fp32' in text and '| pil-fp32 | MoCo-v2 |' in text
