"""benchmark.harness.speed.pipeline: configuration names, the bound rule, the cached fake
folder, the throughput hook's arithmetic and the summary of rounds."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from benchmark.harness.speed import pipeline as speed_pipeline
from benchmark.harness.speed.breakdown import Clock, Marks
from benchmark.harness.speed.pipeline import (PAPER_GRID, ThroughputHook, MeasuredEnough,
                                              bench_pipeline, bound, config_name,
                                              config_settings, fake_data, images_needed)
from benchmark.harness.speed.timing import Settings


def test_configuration_names_round_trip():
    for name in PAPER_GRID:
        assert config_name(config_settings(Settings(), name)) == name
    s = config_settings(Settings(), 'gpu-bf16-cl')
    assert (s.views, s.precision, s.channels_last, s.compile) == ('gpu', 'bf16', True, False)
    s = config_settings(Settings(), 'pil-fp32-compile')
    assert (s.views, s.precision, s.channels_last, s.compile) == ('pil', 'fp32', False, True)
    assert PAPER_GRID[-1] == 'gpu-bf16-cl-compile'
    s = config_settings(Settings(), 'gpu-bf16-cl-graph')
    assert (s.channels_last, s.compile, s.step_graph) == (True, False, True)
    assert config_name(s) == 'gpu-bf16-cl-graph'
    for bad in ('gpu', 'tpu-fp32', 'pil-fp16', 'pil-fp32-nhwc', 'gpu-bf16-compile-cl',
                'gpu-bf16-cl-cl', 'gpu-bf16-graph-cl'):
        with pytest.raises(ValueError, match='VIEWS-PRECISION'):
            config_settings(Settings(), bad)


def test_bound_rule():
    assert bound(0.10, 1.0) == 'data'  # waits 10% of the time: the loader limits it
    assert bound(0.05, 0.95) == 'compute'
    assert bound(0.05, 0.80) == 'overhead'


def test_images_needed():
    assert images_needed(Settings(batch=8, pipeline_warmup=2, pipeline_iters=4,
                                  feature_images=16)) == 56  # + the counted iteration
    assert images_needed(Settings(batch=8, feature_images=1000)) == 1000
    assert images_needed(Settings(images=20000)) == 20000


def test_fake_data_is_reused_while_its_spec_matches(tmp_path):
    s = Settings(images=30, data_dir=str(tmp_path / 'cache'))
    root = Path(fake_data(s, str(tmp_path / 'tmp')))
    assert len(list(root.glob('train/*/images/*.JPEG'))) == 30  # 10 classes x 3
    first = root / 'train' / 'n00000000' / 'images' / 'n00000000_0.JPEG'
    stamp = first.stat().st_mtime_ns
    assert fake_data(s, str(tmp_path / 'tmp')) == str(root) and first.stat().st_mtime_ns == stamp
    spec = json.loads((root.parent / 'spec.json').read_text())
    assert spec['num_classes'] == 10 and spec['train_per_class'] == 3
    (root.parent / 'spec.json').unlink()  # an interrupted generation: made again
    assert fake_data(s, str(tmp_path / 'tmp')) == str(root)
    assert (root.parent / 'spec.json').is_file() and not (tmp_path / 'tmp').exists()


def test_throughput_hook_times_after_warmup_and_stops(monkeypatch):
    """The clock is read (after draining the device) only where the timed window starts and
    ends; one more iteration is counted, then the run stops."""
    clock = iter([1.0, 5.0])
    monkeypatch.setattr(speed_pipeline.time, 'perf_counter', lambda: next(clock))
    waits = iter([0.2, 0.1, 0.3])
    hub = SimpleNamespace(get_scalar=lambda key: SimpleNamespace(current=lambda: next(waits)))
    runner = SimpleNamespace(message_hub=hub)
    cpu = torch.device('cpu')
    hook = ThroughputHook(warmup=1, iterations=3, device=cpu, marks=Marks(Clock(cpu)))
    hook.before_train_epoch(runner)
    for i in range(4):
        hook.after_train_iter(runner, i, data_batch=i)
    hook.before_train_iter(runner, 4)
    with pytest.raises(MeasuredEnough):
        torch.ones(2).sum()  # the counted iteration's work
        hook.after_train_iter(runner, 4, data_batch=4)
    # three timed iterations from t=1 to t=5, 8 images each
    assert hook.images_per_s(8) == 3 * 8 / 4
    assert hook.data_wait_fraction() == pytest.approx((0.2 + 0.1 + 0.3) / 4)
    assert hook.last_batch == 4
    assert hook.counts['aten_ops'] >= 2 and hook.counts['host_reads'] == 0
    short = ThroughputHook(warmup=4, iterations=4, device=cpu, marks=Marks(Clock(cpu)))
    with pytest.raises(ValueError, match='raise --images'):
        short.images_per_s(8)


def test_the_prepare_timer_counts_the_views_drawn_ahead_inside_the_window():
    """A preprocessor's `prepare`, wrapped: each call's host time, and per iteration the calls
    that started inside the timed window; the calls still return what `prepare` returns, and a
    preprocessor without `prepare` is left alone."""
    from benchmark.data.gpu_views import GPUViewPreprocessor
    from benchmark.harness.speed.breakdown import PrepareTimer
    pre = GPUViewPreprocessor(view='mocov2', input_size=16, prefetch=True)
    timer = PrepareTimer(pre)
    batch = dict(inputs=torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8),
                 data_samples=torch.arange(4), seed=torch.arange(4))
    out = pre.prepare(batch)
    assert len(out['inputs']) == 2 and out['inputs'][0].shape == (4, 3, 16, 16)
    (start, seconds), = timer.calls
    assert seconds > 0
    assert timer.ms_per_iteration((start, start + 1), 2) == pytest.approx(1e3 * seconds / 2)
    assert timer.ms_per_iteration((start + 1e-9, start + 1), 2) == 0
    plain = SimpleNamespace()
    assert PrepareTimer(plain).calls == [] and not hasattr(plain, 'prepare')


def test_bench_pipeline_summarises_rounds(monkeypatch):
    """MixCo runs at 3/4 of MoCo-v2's rate in both rounds while the machine halves its speed."""
    rates = {('mocov2', 0): 100.0, ('mixco', 0): 75.0, ('mocov2', 1): 50.0, ('mixco', 1): 37.5}

    def block(method, s, device, data_root, work_dir, name):
        r = int(name[-1])
        return dict(images_per_s=rates[method, r], iterations=6, data_wait_fraction=0.2,
                    epoch_peak_bytes=None, seconds=[s.batch / (1.25 * rates[method, r])],
                    own_bytes=10, peak_bytes=40 if method == 'mixco' else 32,
                    breakdown=dict(ms=dict(wall=r + 1.0, views=0.5), host_syncs=None))

    monkeypatch.setattr(speed_pipeline, 'pipeline_block', block)
    s = Settings(batch=8, pipeline_rounds=2)
    out = bench_pipeline(s, torch.device('cpu'), 'data', 'tmp', dict(mocov2=4e9, mixco=5.5e9),
                         peak=None)
    assert out['time_ratio'] == pytest.approx(4 / 3)
    assert out['bare_time_ratio'] == pytest.approx(4 / 3) and out['memory_ratio'] == 1.25
    mixco = out['methods']['mixco']
    assert mixco['images_per_s'] == [75.0, 37.5] and mixco['median_efficiency'] == 0.8
    assert mixco['bound'] == 'data' and mixco['tflops'] == pytest.approx(56.25 * 5.5e9 / 1e12)
    assert 'epoch_memory_ratio' not in out and out['views'] == 'pil'
    assert mixco['breakdown'] == dict(ms=dict(wall=1.5, views=0.5), host_syncs=None)


def test_a_step_graph_that_cannot_be_captured_is_reported_not_raised():
    """The bare step's graph form says in one line why it could not be captured (here: views
    off the GPU), so the rest of the speed run goes on."""
    out = speed_pipeline.graphed_steps(torch.nn.Linear(2, 2), None, [torch.zeros(1)], None,
                                       torch.device('cpu'), 1)
    assert out == {'graph_error': 'ValueError: StepGraph: the views must be CUDA tensors (a CUDA '
                                  'graph); run the eager step elsewhere'}
