"""benchmark.harness.speed.loop: the blocks run in turn (A B, B A), the long-run phase's log
history, and a tiny real comparison of the Runner with the plain loop."""
from types import SimpleNamespace

import pytest
import torch
from mmengine.logging import MessageHub

from benchmark.harness.speed.loop import (LoopTimer, NullBackbone, bench_loop, fill_history,
                                          loop_line)
from benchmark.harness.speed.pipeline import MeasuredEnough, fake_data
from benchmark.harness.speed.timing import Settings


def test_blocks_alternate_and_the_history_is_filled_between_phases():
    events = []
    timer = LoopTimer(lambda n: events.append(('plain', n)), warmup=2, iters=3, rounds=2,
                      phases=['fresh', 'long'], device=torch.device('cpu'),
                      prefill=lambda runner: events.append(('prefill',)))
    assert [who for _, who in timer.segments] == ['project', 'plain', 'plain', 'project'] * 2
    runner = SimpleNamespace()
    with pytest.raises(MeasuredEnough):
        for i in range(100):
            events.append(('runner', i + 1))
            timer.after_train_iter(runner, i)
    assert i + 1 == timer.iterations_needed() == 2 + 3 * 4
    # Warm-up: 2 Runner iterations, then 2 plain ones (untimed); then blocks of 3 in turn:
    # fresh R P | P R, the history filled, long R P | P R.
    r, p = [('runner', n) for n in range(15)], ('plain', 3)
    assert events == [r[1], r[2], ('plain', 2), r[3], r[4], r[5], p, p, r[6], r[7], r[8],
                      ('prefill',), r[9], r[10], r[11], p, p, r[12], r[13], r[14]]
    for phase in ('fresh', 'long'):
        assert len(timer.seconds[phase]['project']) == len(timer.seconds[phase]['plain']) == 2


def test_fill_history_gives_every_training_scalar_a_long_history():
    hub = MessageHub.get_instance('loop-fill-test')
    hub.update_scalar('train/loss', 2.0)
    hub.update_scalar('val/acc', 1.0)
    fill_history(1000)(SimpleNamespace(message_hub=hub))
    assert len(hub.get_scalar('train/loss').data[0]) == 1000
    assert hub.get_scalar('train/loss').current() == 2.0
    assert len(hub.get_scalar('val/acc').data[0]) == 1


def test_null_backbone_has_the_feature_size_and_almost_no_compute():
    out = NullBackbone(512)(torch.randn(4, 3, 16, 16))
    assert out.shape == (4, 512)


@pytest.mark.slow
def test_tiny_comparison_reports_both_kinds_and_phases(tmp_path):
    s = Settings(input_size=16, batch=4, loop_rounds=2, loop_iters=2, loop_null_iters=3,
                 loop_history=500, loop_warmup=2, images=64)
    result = bench_loop(s, torch.device('cpu'), fake_data(s, str(tmp_path)), str(tmp_path),
                        log=lambda line: None)
    for kind in ('resnet', 'null'):
        for phase in ('fresh', 'long'):
            r = result[kind][phase]
            assert len(r['project_ms']) == len(r['plain_ms']) == 2
            assert r['median_project_ms'] > 0 and r['median_plain_ms'] > 0 and r['ratio'] > 0
    for workers in ('workers_0', 'workers_1'):
        r = result['seeding'][workers]
        assert r['seeded_ms'] > 0 and r['plain_ms'] > 0 and r['ratio'] > 0
    line = loop_line(result, s)
    assert 'near-zero-compute model' in line and 'after 500 logged values' in line
    assert 'workers 1:' in line
