"""benchmark.harness.speed.timing: alternation, paired ratios, storage bytes, CPU peak growth;
the package's quiet profiler."""
import importlib
import os

import pytest
import torch
from torch import nn

import benchmark.harness.speed as speed
from benchmark.harness.speed import timing
from benchmark.harness.speed.timing import (Settings, cpu_peak_growth, in_turn, own_bytes,
                                      paired_ratio, step_peak_bytes, timed)


def test_in_turn_alternates_the_order():
    items = ['a', 'b', 'c']
    assert [in_turn(items, r) for r in range(3)] == [['a', 'b', 'c'], ['c', 'b', 'a'],
                                                      ['a', 'b', 'c']]


def test_paired_ratio_is_the_median_of_pairwise_ratios():
    assert paired_ratio([2.0, 9.0, 4.0], [1.0, 3.0, 1.0]) == 3.0  # ratios 2, 3, 4
    assert paired_ratio([1.0, 3.0], [2.0, 2.0]) == 1.0  # ratios 0.5, 1.5: mean of the middle
    # a 10x slowdown between pairs leaves the ratio alone; the ratio of sums would not
    assert paired_ratio([1.1, 11.0, 1.1], [1.0, 10.0, 1.0]) == pytest.approx(1.1)


def test_own_bytes_counts_each_storage_once():
    model = nn.Linear(10, 5)  # weight 50 + bias 5 float32 = 220 bytes
    model.register_buffer('steps', torch.zeros(3, dtype=torch.int64))  # 24 bytes
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(2, 10)).sum().backward()
    optimizer.step()  # momentum buffers: another 220 bytes
    x = torch.zeros(4, 10, dtype=torch.float64)  # 320 bytes
    assert own_bytes(model, optimizer, [x, x[1:], x.view(40)]) == 220 + 24 + 220 + 320
    expected = sum(t.untyped_storage().nbytes() for t in
                   [*model.parameters(), *model.buffers(), x,
                    *(v for st in optimizer.state.values() for v in st.values()
                      if torch.is_tensor(v))])
    assert own_bytes(model, optimizer, [x]) == expected


def test_cpu_peak_growth_of_a_1_mib_tensor():
    def fn():
        t = torch.empty(256 * 1024)  # 1 MiB of float32
        t.fill_(1.0)
        del t

    cpu_peak_growth(fn)  # the first profiler session initialises the profiler
    peak = cpu_peak_growth(fn)
    assert 2**20 <= peak < 2**20 + 4096
    assert step_peak_bytes(fn, torch.device('cpu')) == peak  # the CPU path of the generic call


def test_timed_returns_the_wall_time(monkeypatch):
    clock = iter([5.0, 7.5])
    monkeypatch.setattr(timing.time, 'perf_counter', lambda: next(clock))
    calls = []
    assert timed(lambda: calls.append(1), torch.device('cpu')) == 2.5
    assert calls == [1]


def test_settings_defaults():
    s = Settings()
    assert (s.depth, s.input_size, s.batch, s.knn_bank, s.knn_k, tuple(s.skip)) == (
        18, 32, 32, 20000, 200, ('demo',))  # the demo part's real runs only when asked for


def test_cpu_peak_growth_counts_live_tensor_bytes():
    """Two 4 MB tensors alive at once, then one freed before a third: the peak is 8 MB exactly."""
    def fn():
        a, b = torch.empty(10**6), torch.empty(10**6)  # float32: 4,000,000 bytes each
        del a
        c = torch.empty(10**6)
        del b, c

    cpu_peak_growth(fn)  # first profiler session initialises the profiler
    assert cpu_peak_growth(fn) == 8_000_000


def test_settings_defaults_of_the_new_parts():
    s = Settings()
    assert (s.pipeline_iters, s.images, s.data_dir, tuple(s.configs), s.paper) == (
        6, None, None, (), False)
    assert (s.views_native, s.views_repeats) == (64, 3)


def test_the_speed_package_quiets_the_profiler_unless_told_otherwise(monkeypatch):
    """tools/benchmark_speed.py reaches torch through this package, whose __init__ sets kineto's
    log level first (the profiler of `timing` logs a line per trace otherwise); a level the
    user set stays."""
    monkeypatch.delenv('KINETO_LOG_LEVEL', raising=False)
    importlib.reload(speed)
    assert os.environ['KINETO_LOG_LEVEL'] == '5'
    monkeypatch.setenv('KINETO_LOG_LEVEL', '1')
    importlib.reload(speed)
    assert os.environ['KINETO_LOG_LEVEL'] == '1'
