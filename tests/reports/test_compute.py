"""benchmark.reports.compute: a row's compute from its records (the training step's count where
the records hold one, empty for older records) and the hardware, into the CSV."""
import csv
import io

import pytest

from benchmark.reports.compute import (compute_text, flop_text, host_text, mean, number,
                                       record_compute, row_compute)
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.tables import render_csv
from tests.reports.record_sets import record

pytestmark = pytest.mark.usefixtures('quick_provenance')
HOST = dict(device='cpu', cpu='AMD EPYC', cpu_cores=1, machine_cores=2)
COUNT = dict(batch=64, images_with_grad=1.5, images_without_grad=1.0, encoder_passes=2.5,
             pass_units=5.5, flops_per_image=173_574_144.0, train_images=43_200,
             train_flops=173_574_144.0 * 43_200, device_seconds=812.5, processes=2)
STEP_ONLY = {k: v for k, v in COUNT.items() if k in ('batch', 'images_with_grad',
                                                      'images_without_grad', 'encoder_passes',
                                                      'pass_units', 'flops_per_image')}


def counted(method: str, seed: int, count=COUNT, host=HOST) -> dict:
    out = record(method, seed, 90.0 + seed, protocols=('knn',))
    out['extra'] = dict(out['extra'] or {}, **({'compute': count} if count else {}))
    out['host'] = host
    return out


def test_numbers_and_means_leave_out_what_is_not_a_number():
    assert [number(v) for v in (2, 2.5, True, None, 'NA(nan)')] == [2.0, 2.5, None, None, None]
    assert mean([1, None, 'NA(x)', 3.0]) == 2.0 and mean([None]) is None


def test_a_records_count_and_an_older_record_without_one():
    assert record_compute(counted('mixco', 0)) == dict(
        encoder_passes=2.5, gflop_per_image=0.173574144, train_flops=173_574_144.0 * 43_200,
        device_seconds=812.5)
    assert record_compute(counted('mixco', 0, count=None)) == dict(
        encoder_passes=None, gflop_per_image=None, train_flops=None, device_seconds=None)
    # a step counted before the run's total was: the step's numbers, the total not counted
    assert record_compute(counted('mixco', 0, count=STEP_ONLY))['train_flops'] is None


def test_compute_text_in_units_and_not_counted():
    assert flop_text(7.49856e12) == '7.5 TFLOP' and flop_text(6.9e16) == '69 PFLOP'
    assert flop_text(2.5e9) == '2.5 GFLOP' and flop_text(None) == 'not counted'
    assert compute_text(dict(train_flops=7.49856e12, device_seconds=812.5)) == \
        '7.5 TFLOP, 812 device-s'
    assert compute_text(dict(train_flops=3e15, device_seconds=None)) == '3 PFLOP'
    assert compute_text(dict(train_flops=None, device_seconds=5.0)) == 'not counted'


def test_host_text_names_the_device_cpu_and_share():
    assert host_text(HOST) == 'cpu (AMD EPYC, 1 of 2 cores)'
    assert host_text(dict(device='cuda:NVIDIA H200', cpu='Intel Xeon', cpu_cores=16,
                          machine_cores=16)) == 'cuda:NVIDIA H200 (Intel Xeon, 16 cores)'
    assert host_text({}) == 'unknown device'


def test_a_rows_compute_is_the_mean_over_its_records_and_their_hardware():
    gpu = dict(device='cuda:NVIDIA H200', cpu='Intel Xeon', cpu_cores=16, machine_cores=16)
    records = [counted('mixco', 0), counted('mixco', 1, count=None),
               counted('mixco', 2, count=dict(COUNT, flops_per_image=2e8, device_seconds=None),
                       host=gpu),
               dict(counted('mixco', 3), host=None)]  # a stand-in: no host
    out = row_compute(records)
    assert out['encoder_passes'] == 2.5
    assert out['gflop_per_image'] == pytest.approx((0.173574144 * 2 + 0.2) / 3)
    assert (out['train_flops'], out['device_seconds']) == (173_574_144.0 * 43_200, 812.5)
    assert out['hardware'] == ('cpu (AMD EPYC, 1 of 2 cores); '
                               'cuda:NVIDIA H200 (Intel Xeon, 16 cores)')
    assert out['time_s_per_epoch'] == pytest.approx(3.15)


def test_the_csv_holds_the_count_and_leaves_it_empty_for_older_records():
    moco = dict(COUNT, encoder_passes=2.0, flops_per_image=1.263e8, train_flops=1.263e8 * 43_200)
    records = [counted('mocov2', s, count=moco) for s in range(3)]
    records += [counted('mixco', s, count=None) for s in range(3)]
    rows = {r['method']: r for r in csv.DictReader(io.StringIO(render_csv(build_rows(records))))}
    assert (rows['mocov2']['encoder_passes'], rows['mocov2']['gflop_per_image']) == \
        ('2.0', repr(0.1263))
    assert (rows['mixco']['encoder_passes'], rows['mixco']['gflop_per_image']) == ('', '')
    assert (rows['mocov2']['train_flops'], rows['mocov2']['device_seconds']) == \
        (repr(1.263e8 * 43_200), '812.5')
    assert (rows['mixco']['train_flops'], rows['mixco']['device_seconds']) == ('', '')
    assert rows['mixco']['hardware'] == 'cpu (AMD EPYC, 1 of 2 cores)'


def test_the_markdown_shows_the_compute_or_not_counted():
    from benchmark.reports.tables import render_markdown
    records = [counted('mocov2', s) for s in range(2)] + [counted('mixco', 0, count=None)]
    text = render_markdown(build_rows(records), 'x')
    header = next(line for line in text.splitlines() if 'training compute' in line)
    column = header.split(' | ').index('training compute')
    cells = {line.split(' | ')[2]: line.split(' | ')[column] for line in text.splitlines()
             if line.startswith('| ') and 'training compute' not in line and '---' not in line}
    assert cells['MoCo-v2'] == '7.5 TFLOP, 812 device-s'
    assert cells['MixCo (MoCo-v2)'] == 'not counted'
