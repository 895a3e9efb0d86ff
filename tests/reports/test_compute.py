"""benchmark.reports.compute: a row's compute from its records (the training step's count where
the records hold one, empty for older records) and the hardware, into the CSV."""
import csv
import io

import pytest

from benchmark.reports.compute import host_text, mean, number, record_compute, row_compute
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.tables import render_csv
from tests.reports.record_sets import record

pytestmark = pytest.mark.usefixtures('quick_provenance')
HOST = dict(device='cpu', cpu='AMD EPYC', cpu_cores=1, machine_cores=2)
COUNT = dict(batch=64, images_with_grad=1.5, images_without_grad=1.0, encoder_passes=2.5,
             pass_units=5.5, flops_per_image=173_574_144.0)


def counted(method: str, seed: int, count=COUNT, host=HOST) -> dict:
    out = record(method, seed, 90.0 + seed, protocols=('knn',))
    out['extra'] = dict(out['extra'] or {}, **({'compute': count} if count else {}))
    out['host'] = host
    return out


def test_numbers_and_means_leave_out_what_is_not_a_number():
    assert [number(v) for v in (2, 2.5, True, None, 'NA(nan)')] == [2.0, 2.5, None, None, None]
    assert mean([1, None, 'NA(x)', 3.0]) == 2.0 and mean([None]) is None


def test_a_records_count_and_an_older_record_without_one():
    assert record_compute(counted('mixco', 0)) == dict(encoder_passes=2.5,
                                                       gflop_per_image=0.173574144)
    assert record_compute(counted('mixco', 0, count=None)) == dict(encoder_passes=None,
                                                                   gflop_per_image=None)


def test_host_text_names_the_device_cpu_and_share():
    assert host_text(HOST) == 'cpu (AMD EPYC, 1 of 2 cores)'
    assert host_text(dict(device='cuda:NVIDIA H200', cpu='Intel Xeon', cpu_cores=16,
                          machine_cores=16)) == 'cuda:NVIDIA H200 (Intel Xeon, 16 cores)'
    assert host_text({}) == 'unknown device'


def test_a_rows_compute_is_the_mean_over_its_records_and_their_hardware():
    gpu = dict(device='cuda:NVIDIA H200', cpu='Intel Xeon', cpu_cores=16, machine_cores=16)
    records = [counted('mixco', 0), counted('mixco', 1, count=None),
               counted('mixco', 2, count=dict(COUNT, flops_per_image=2e8), host=gpu),
               dict(counted('mixco', 3), host=None)]  # a stand-in: no host
    out = row_compute(records)
    assert out['encoder_passes'] == 2.5
    assert out['gflop_per_image'] == pytest.approx((0.173574144 * 2 + 0.2) / 3)
    assert out['hardware'] == ('cpu (AMD EPYC, 1 of 2 cores); '
                               'cuda:NVIDIA H200 (Intel Xeon, 16 cores)')
    assert out['time_s_per_epoch'] == pytest.approx(3.15)


def test_the_csv_holds_the_count_and_leaves_it_empty_for_older_records():
    moco = dict(COUNT, encoder_passes=2.0, flops_per_image=1.263e8)
    records = [counted('mocov2', s, count=moco) for s in range(3)]
    records += [counted('mixco', s, count=None) for s in range(3)]
    rows = {r['method']: r for r in csv.DictReader(io.StringIO(render_csv(build_rows(records))))}
    assert (rows['mocov2']['encoder_passes'], rows['mocov2']['gflop_per_image']) == \
        ('2.0', repr(0.1263))
    assert (rows['mixco']['encoder_passes'], rows['mixco']['gflop_per_image']) == ('', '')
    assert rows['mixco']['hardware'] == 'cpu (AMD EPYC, 1 of 2 cores)'
