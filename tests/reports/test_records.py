"""Result records: required fields, round trip, never overwriting, concurrent writers, bad files."""
import json
import subprocess
import sys

import pytest

from benchmark.layout import REPO_ROOT
from benchmark.reports.records import build_record, load_records, write_record

ROOT = REPO_ROOT
# The record schema other code relies on (spelled out here, not imported, so a change shows).
SETTING_FIELDS = ('setting_sha256', 'overrides')  # optional: older records lack them
REQUIRED = {'schema', 'id', 'created', 'method', 'backbone', 'pretrain_data', 'pretrain_epochs',
            'eval_data', 'protocols', 'seed', 'world_size', 'total_batch', 'time_s_per_epoch',
            'peak_memory_gb', 'config', 'checkpoint', 'config_sha256', 'status', 'extra',
            'versions', 'git', 'host'}
VERSIONS = {'python', 'torch', 'torchvision', 'mmengine', 'lightly', 'faiss', 'sklearn', 'numpy'}


def make_record(method='mixco', seed=0, **fields):
    kwargs = dict(method=method, backbone='resnet18', pretrain_data='tiny-imagenet',
                  pretrain_epochs=100, eval_data='cifar10', seed=seed, world_size=2,
                  total_batch=128, time_s_per_epoch=150.5, peak_memory_gb=4.5,
                  config='configs/mixco_r18_tiny.py', config_text="model = dict(type='X')\n",
                  protocols={'knn': {'settings': {'k': 200, 'temperature': 0.1},
                                     'metrics': {'top1': 51.25, 'top5': 'NA(4 classes)'}}})
    kwargs.update(fields)
    return build_record(**kwargs)


def test_setting_sha256_is_the_setting_and_its_processes_not_the_seed():
    one = make_record(setting_text='model = 1', overrides={'model.a': 0.1}, seed=0)
    assert one['overrides'] == {'model.a': 0.1}
    assert len(one['setting_sha256']) == 64
    assert make_record(setting_text='model = 1', seed=5)['setting_sha256'] == one['setting_sha256']
    assert make_record(setting_text='model = 2')['setting_sha256'] != one['setting_sha256']
    assert (make_record(setting_text='model = 1', world_size=1)['setting_sha256']
            != one['setting_sha256'])
    with pytest.raises(ValueError, match='overrides'):
        make_record(setting_text='x', overrides={'a': object()})


def test_record_has_every_field_and_round_trips(tmp_path):
    record = make_record()
    assert set(record) == REQUIRED | set(SETTING_FIELDS)
    assert record['setting_sha256'] is None and record['overrides'] == {}
    assert record['schema'] == 1 and 'mixco' in record['id']
    assert record['created'].endswith('+00:00')  # ISO, UTC
    assert set(record['versions']) == VERSIONS and record['versions']['python']
    assert set(record['git']) == {'commit', 'dirty', 'diff_sha256'}
    assert set(record['host']) == {'node', 'device', 'cpu', 'cpu_kernels', 'cpu_cores',
                                   'machine_cores'}
    assert record['host']['cpu_kernels'] in ('AVX512', 'AVX2', 'DEFAULT', 'VSX', 'ZVECTOR', 'SVE256')
    assert record['host']['device'] == 'cpu' or record['host']['device'].startswith('cuda:')
    assert len(record['config_sha256']) == 64
    assert make_record(config_text=None)['config_sha256'] is None
    path = write_record(record, str(tmp_path))
    assert path == tmp_path / 'runs' / f"{record['id']}.json"
    assert load_records(str(tmp_path)) == [record]


def test_numpy_values_and_unknown_world_size_are_stored():
    import numpy as np
    record = make_record(world_size=None, total_batch=None, extra={'lam': np.float32(0.5)},
                         protocols={'knn': {'settings': {'k': np.int64(20)},
                                            'metrics': {'top1': np.float64(12.5)}}})
    assert record['protocols']['knn'] == {'settings': {'k': 20}, 'metrics': {'top1': 12.5}}
    assert record['extra'] == {'lam': 0.5} and record['world_size'] is None
    with pytest.raises(ValueError, match='extra cannot be stored as JSON'):
        make_record(extra={'model': object()})


def test_ids_are_unique_and_nan_becomes_na():
    records = [make_record(protocols={'knn': {'metrics': {'top1': float('nan')}}})
               for _ in range(5)]
    assert len({r['id'] for r in records}) == 5
    assert records[0]['protocols']['knn'] == {'settings': {}, 'metrics': {'top1': 'NA(nan)'}}


@pytest.mark.parametrize('change, match', [
    (dict(protocols={'linear': {'metrics': {'top1': 1.0}}}), 'linear_paper or linear_fast'),
    (dict(protocols={'knn': {'metrics': {'top1': 'bad'}}}), "NA\\(<reason>\\)"),
    (dict(protocols={'knn': {'settings': {}}}), 'metrics'),
    (dict(status='exploded'), 'status'),
    (dict(seed=1.5), 'seed'),
    (dict(backbone=''), 'backbone'),
])
def test_bad_records_are_refused(change, match):
    with pytest.raises(ValueError, match=match):
        make_record(**change)


def test_write_never_overwrites(tmp_path):
    record = make_record()
    path = write_record(record, str(tmp_path))
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match='never overwritten'):
        write_record(dict(record, method='mocov2'), str(tmp_path))
    assert path.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / 'runs').iterdir()) == [path.name]  # no temp left


WORKER = """
import json, sys, time, datetime
from pathlib import Path
from benchmark.reports.records import new_id, write_record
template, out, contested, go, count = json.loads(sys.argv[1]), *sys.argv[2:5], int(sys.argv[5])
print('ready', flush=True)
while not Path(go).exists():
    time.sleep(0.01)
try:
    write_record(dict(template, id='contested'), contested)
    print('won', flush=True)
except FileExistsError:
    print('lost', flush=True)
for _ in range(count):
    now = datetime.datetime.now(datetime.timezone.utc)
    write_record(dict(template, id=new_id('mixco', now)), out)
"""


def test_concurrent_writers_lose_nothing(tmp_path, subprocess_env):
    out, contested, go = tmp_path / 'results', tmp_path / 'contested', tmp_path / 'go'
    template = json.dumps(make_record())
    procs = [subprocess.Popen([sys.executable, '-c', WORKER, template, str(out), str(contested),
                               str(go), '20'], cwd=ROOT, env=subprocess_env,
                              stdout=subprocess.PIPE, text=True) for _ in range(8)]
    assert all(p.stdout.readline().strip() == 'ready' for p in procs)
    go.touch()  # release all writers at once
    results = [p.communicate(timeout=120)[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0] * 8
    assert sorted(r[0] for r in results) == ['lost'] * 7 + ['won']  # one O_EXCL winner
    files = list((out / 'runs').iterdir())
    assert len(files) == 160 and all(f.suffix == '.json' for f in files)
    records = [json.loads(f.read_text()) for f in files]
    assert len({r['id'] for r in records}) == 160
    assert len(load_records(str(out))) == 160
    assert [f.name for f in (contested / 'runs').iterdir()] == ['contested.json']


def test_bad_files_are_skipped_with_a_warning(tmp_path):
    good = make_record()
    write_record(good, str(tmp_path))
    runs = tmp_path / 'runs'
    (runs / 'truncated.json').write_text('{"schema": 1, "id": "x"')
    (runs / 'list.json').write_text('[1, 2]')
    (runs / 'partial.json').write_text(json.dumps({k: good[k] for k in ('schema', 'id')}))
    (runs / 'future.json').write_text(json.dumps(dict(good, schema=99)))
    (runs / 'nometrics.json').write_text(json.dumps(dict(good, protocols={'knn': 1})))
    (runs / '.half.tmp').write_text('{')  # a writer's temp file is not a record
    with pytest.warns(UserWarning) as caught:
        assert load_records(str(tmp_path)) == [good]
    messages = ' '.join(str(w.message) for w in caught)
    for name in ('truncated.json', 'list.json', 'partial.json', 'future.json', 'nometrics.json'):
        assert name in messages
    assert len(caught) == 5 and '\n' not in messages


def test_load_sorts_by_created_and_tolerates_no_runs(tmp_path):
    assert load_records(str(tmp_path / 'nothing')) == []
    first, second = make_record(seed=1), make_record(seed=2)
    write_record(dict(second, id='a-second'), str(tmp_path))
    write_record(dict(first, id='z-first'), str(tmp_path))
    assert [r['seed'] for r in load_records(str(tmp_path))] == [1, 2]
