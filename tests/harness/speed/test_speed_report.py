"""benchmark.harness.speed.report: the tables and lines the harness prints, from a made-up
result."""
from benchmark.harness.speed.report import markdown, paper_line, views_line
from benchmark.harness.speed.step import METHODS, PAIRS
from benchmark.harness.speed.timing import Settings


def made_up_result() -> dict:
    step = dict(seconds_per_step=0.1, images_per_s=320.0, flops_per_image=4e9, tflops=1.28,
                peak_fraction=None, peak_bytes=2**20 * 100)
    result = dict(device='cpu test', device_name='cpu', memory_kind='cpu: test',
                  peak_tflops=dict(fp32=None, bf16=None), steps={m: dict(step) for m in METHODS})
    for pair in PAIRS:
        result.update({f'{pair}_{k}': 1.5 for k in ('time_ratio', 'floor_passes',
                                                    'floor_flops', 'memory_ratio')})
    method = dict(median_images_per_s=100.0, median_bare_images_per_s=125.0,
                  median_efficiency=0.8, median_data_wait_fraction=0.25, bound='data', tflops=0.4,
                  peak_fraction=0.5, breakdown=dict(
                      ms=dict(wall=40.0, wait=0.5, prepare=0.25, views=2.0, step=35.0, hooks=1.0,
                              rest=1.5),
                      host_syncs=0, counted_iteration=dict(aten_ops=900, host_reads=0)))
    result['pipeline'] = {'gpu-bf16-cl': dict(methods=dict(mocov2=method, mixco=method),
                                              time_ratio=1.2, memory_ratio=1.1)}
    return result


def test_markdown_tables():
    text = markdown(made_up_result(), Settings())
    assert text.startswith('Speed and memory: ResNet-18, 32 px, batch 32 per process; cpu test.')
    assert 'Peak: cpu: no peak known.' in text
    assert ('| Un-Mix (MoCo-v2) | MoCo-v2 | 100.0 | 320.0 | 4 | 1.28 | n/a | 100.0 | 1.50 | 1.50 '
            '| 1.50 | 1.50 |') in text
    assert '| MoCo-v2 | - | 100.0 | 320.0 | 4 | 1.28 | n/a | 100.0 | 1.00 | 1.00 | 1.00 | 1.00 |' \
        in text
    assert ('| gpu-bf16-cl | MixCo (MoCo-v2) | 100.0 | 125.0 | 0.80 | 25.0% | 1.20 | 1.10 | 0.4 '
            '| 50.0% | data |') in text
    assert ('| gpu-bf16-cl | MixCo (MoCo-v2) | 40.0 | 0.5 | 0.2 | 2.0 | 35.0 | 1.0 | 1.5 | 0 | 900 '
            '| 0 |') in text
    assert 'Paper setting' not in text and 'kNN' not in text and 'load average' not in text
    loaded = markdown(dict(made_up_result(), load_average=dict(start=[4.5, 3.0, 2.0],
                                                               end=[5.0, 4.0, 3.0])), Settings())
    assert 'Host load average (1, 5, 15 min) at start [4.5, 3.0, 2.0], at end [5.0, 4.0, 3.0].' \
        in loaded


def test_paper_and_views_lines():
    result = dict(paper_setting_config='gpu-bf16-cl', paper_setting_images_per_s=1500.0,
                  paper_setting_mocov2_images_per_s=2000.0, paper_setting_data_wait=0.02,
                  paper_setting_bound='compute', paper_setting_time_ratio=1.33,
                  paper_setting_memory_ratio=1.25, paper_setting_tflops=30.0,
                  paper_setting_peak_fraction=0.0303, paper_setting_floor_images_per_s=49500.0)
    line = paper_line(result)
    assert line.startswith('Paper setting, fastest configuration gpu-bf16-cl: MixCo 1500.0 ')
    assert '(MoCo-v2 2000.0), waiting for data 2.0%, bound: compute' in line
    assert ('time 1.33, memory 1.25; 30 TFLOP/s (3.0% of the device peak, which would allow '
            '49500 images/s).') in line
    no_peak = paper_line(dict(result, paper_setting_peak_fraction=None,
                              paper_setting_floor_images_per_s=None))
    assert no_peak.endswith('30 TFLOP/s (no peak known).')
    views = dict(batch=64, native=64, size=224, device='cuda',
                 ms_per_batch=dict(device_path=5.0, pil_per_image=400.0, kornia=None))
    assert views_line(views) == ('Views (64 images 64 px -> 2 views 224 px, cuda): device path '
                                 '5.0 ms per batch, PIL image by image 400.0 ms (one worker), '
                                 'kornia not installed.')
    views['ms_per_batch'].update(device_path_graphed=1.0, device_path_compiled=3.0, kornia=2.0)
    assert 'device path 5.0 ms per batch (1.0 ms graphed, 3.0 ms compiled), PIL' in views_line(
        views) and views_line(views).endswith('kornia 2.0 ms.')
