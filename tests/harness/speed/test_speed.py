"""benchmark.harness.speed.bench: the family's ratios and floors, the bare steps, the grid's
headline keys, and a run saving each part as it ends (the tool's errors and runs:
tests/tools/test_tool_arguments.py, tests/tools/test_benchmark_speed_tool.py and
tests/e2e/test_speed_tool_runs.py)."""
import json

import pytest
import torch

from benchmark.harness.speed import bench as speed
from benchmark.harness.speed.bench import bench_steps, compile_speedup, paper_keys, step_ratios
from benchmark.harness.speed.step import FAMILY, PAIRS
from benchmark.harness.speed.timing import Settings
from tests.harness.speed.test_speed_floor import PASSES


def test_step_ratios_pair_each_member_with_its_baseline():
    """Hand-made step records: MixCo's steps take 1.5x, 2x, 1.5x MoCo-v2's adjacent ones."""
    base = dict(step_seconds=[1.0, 2.0, 4.0], peak_bytes=100, step_peak_growth_bytes=40,
                flops_per_image=4.0)
    steps = {m: dict(base, encoder_images=PASSES.get(m, (1.0, 1.0))) for m in FAMILY
             if m != 'mixco'}
    steps['mixco'] = dict(step_seconds=[1.5, 4.0, 6.0], peak_bytes=130, step_peak_growth_bytes=70,
                          flops_per_image=5.5, encoder_images=(1.5, 1.0))
    out = step_ratios(steps)
    assert out['mixco_moco_time_ratio'] == 1.5  # median of 1.5, 2, 1.5
    assert out['mixco_moco_memory_ratio'] == 1.3 and out['mixco_moco_step_growth_ratio'] == 1.75
    assert out['mixco_moco_floor_flops'] == 5.5 / 4.0
    assert out['mixco_moco_floor_passes'] == 1.375 and out['unmix_moco_floor_passes'] == 1.75
    assert out['imix_moco_time_ratio'] == 1.0 and out['mixco_simclr_floor_passes'] == 1.5
    assert {k.rsplit('_', 2)[0] for k in out if k.endswith('_floor_flops')} == set(PAIRS)


@pytest.mark.slow
def test_bench_steps_times_and_counts_each_member():
    s = Settings(input_size=16, batch=4, small_stem=True, repeats=2, warmup=0)
    steps = bench_steps(s, torch.device('cpu'), methods=('mocov2', 'mixco'))
    for m in ('mocov2', 'mixco'):
        r = steps[m]
        assert len(r['step_seconds']) == 2 and r['images_per_s'] == 4 / r['seconds_per_step']
        assert r['peak_bytes'] == r['own_bytes'] + r['step_peak_growth_bytes']
        assert r['tflops'] == pytest.approx(r['images_per_s'] * r['flops_per_image'] / 1e12)
        assert r['peak_fraction'] is None  # no peak known for a CPU
    assert steps['mocov2']['encoder_images'] == (1.0, 1.0)  # queries, keys
    assert steps['mixco']['encoder_images'] == (1.5, 1.0)  # + B/2 mixed queries
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


def test_run_saves_the_result_so_far_after_each_part(monkeypatch, tmp_path):
    """A run cut short (a GPU job's time limit) keeps each finished part: run() hands save() the
    result so far, marked partial, after the steps, each pipeline configuration, the loop
    comparison, the features and kNN; the result it returns is whole and unmarked. Every part is a stub here."""
    def pipeline(c, device, data_root, tmp, flops, peak, tag):
        m = dict(median_images_per_s=2.0 if tag.startswith('gpu') else 1.0, median_data_wait_fraction=0.0,
                 median_efficiency=1.0, bound='compute')
        return dict(methods=dict(mixco=m, mocov2=m), time_ratio=1.2, memory_ratio=1.0)

    monkeypatch.setattr(speed, 'fake_data', lambda s, tmp: tmp)
    monkeypatch.setattr(speed, 'bench_steps', lambda s, device: dict(
        mocov2=dict(flops_per_image=1.0), mixco=dict(flops_per_image=1.5)))
    monkeypatch.setattr(speed, 'step_ratios', lambda steps: dict(mixco_moco_time_ratio=1.3))
    monkeypatch.setattr(speed, 'bench_pipeline', pipeline)
    phase = dict(fixed_ms=0.5, ratio=1.01)
    monkeypatch.setattr(speed, 'bench_loop', lambda s, device, root, tmp, log: dict(
        resnet=dict(fresh=phase, long=phase), null=dict(fresh=phase, long=dict(phase, fixed_ms=0.6))))
    monkeypatch.setattr(speed, 'bench_features', lambda s, device, root: dict(images_per_s=1.0))
    monkeypatch.setattr(speed, 'bench_knn', lambda s: dict(
        seconds=dict(lightly=[2.0], faiss=[1.0], matmul=[1.0]), mismatches_not_ties=0))
    monkeypatch.setattr(speed, 'bench_views', lambda s, device: dict(views=1))
    saves = []  # serialised at once, as tools/benchmark_speed.py writes them
    s = Settings(configs=['pil-fp32', 'gpu-fp32'], paper=True)
    result = speed.run(s, log=lambda msg: None, save=lambda r: saves.append(json.dumps(r)))
    saves = [json.loads(r) for r in saves]
    assert [r['partial']['done'] for r in saves] == [
        'step', 'pipeline pil-fp32', 'pipeline pil-fp32, gpu-fp32', 'loop', 'features', 'knn']
    assert [list(r.get('pipeline', ())) for r in saves] == [
        [], ['pil-fp32'], ['pil-fp32', 'gpu-fp32']] + [['pil-fp32', 'gpu-fp32']] * 3
    assert saves[0]['mixco_moco_time_ratio'] == 1.3 and 'features' in saves[4]
    assert (saves[3]['loop_fixed_ms'], saves[3]['loop_fixed_ms_long_run'],
            saves[3]['loop_time_ratio']) == (0.5, 0.6, 1.01)
    assert 'views' not in saves[-1] and saves[-1]['faiss_same_predictions'] is True
    assert 'partial' not in result and result['views'] == dict(views=1)
    assert result['paper_setting_config'] == 'gpu-fp32'

