"""The published reference: a user's records beside it, the seeds' spread, publishing."""
import json
import math
import random

import numpy as np
import pytest
from scipy import stats

from benchmark.reports.records import build_record, write_record
from benchmark.suites import reference as ref
from tools import reference as tool

AVX512 = {'cpu': 'AMD EPYC (family 25, model 17, AVX-512)', 'cpu_kernels': 'AVX512'}
AVX2 = {'cpu': 'AMD EPYC (family 23, model 49, AVX2)', 'cpu_kernels': 'AVX2'}


def rec(method, seed, knn, host=AVX512, torch='2.14.1', linear=None):
    """A record as `seed_values` reads it (no file)."""
    protocols = {'knn': {'metrics': {'top1': knn, 'top5': 100.0}}}
    if linear is not None:
        protocols['linear_fast'] = {'metrics': {'top1': linear}}
    return dict(method=method, seed=seed, protocols=protocols, host=dict(host),
                versions={'torch': torch}, backbone='resnet18-w0.25',
                pretrain_epochs=0 if method == 'random_init' else 30)


def test_on_the_published_kind_every_value_must_be_equal_bit_for_bit():
    published = [rec('random_init', 0, 79.72), rec('mocov2', 0, 86.94), rec('mocov2', 1, 87.5)]
    rows, sides = ref.compare([dict(r) for r in published], published, None)
    assert [(r['method'], r['metric'], r['verdict']) for r in rows] == [
        ('random init', 'kNN top1', 'equal, bit for bit'),
        ('MoCo-v2', 'kNN top1', 'equal, bit for bit')]
    assert sides['yours'] == ([ref.kind(published[0])], ['2.14.1'], [0, 1])
    drifted = [published[0], published[1], rec('mocov2', 1, 87.5 + 1e-12)]
    rows, _ = ref.compare(drifted, published, None)
    assert rows[1]['finding'] and rows[1]['verdict'].startswith('DIFFERS on the published CPU')
    lines = ref.check_lines(rows, sides, 'results/reference/demo_digits')
    assert lines[1] == ('  published: AMD EPYC (family 25, model 17, AVX-512), AVX512 kernels, '
                        'torch 2.14.1, seeds 0 1')
    assert '1 finding(s)' in lines[-1]


def spread_of(sd, df):
    same = dict(backbone='resnet18-w0.25', protocol='knn', metric='top1')
    return {'metrics': [dict(method='mocov2', epochs=30, sd=sd, df=df, **same),
                        dict(method='random_init', epochs=0, sd=None, df=0,
                             equal_across_kinds=True, **same)]}


def test_on_another_kind_a_mean_is_judged_by_the_seeds_spread():
    published = [rec('random_init', 0, 79.72), rec('mocov2', 0, 86.0), rec('mocov2', 1, 88.0)]
    limit = stats.t.ppf(0.995, 10) * 1.0 * math.sqrt(1 / 2 + 1 / 2)  # 3.17
    near = [rec('random_init', 0, 79.72, AVX2), rec('mocov2', 0, 88.0, AVX2),
            rec('mocov2', 1, 89.0, AVX2)]
    rows, _ = ref.compare(near, published, spread_of(1.0, 10))
    assert rows[0]['verdict'] == 'equal, bit for bit'  # the random encoder carries
    assert rows[1]['verdict'] == f"+1.50, within the seeds' spread (±{limit:.2f})"
    far = near[:1] + [rec('mocov2', 0, 91.0, AVX2), rec('mocov2', 1, 91.0, AVX2)]
    rows, _ = ref.compare(far, published, spread_of(1.0, 10))
    assert rows[1]['finding'] and 'BEYOND the seeds' in rows[1]['verdict']
    moved = [rec('random_init', 0, 80.0, AVX2)] + near[1:]
    rows, _ = ref.compare(moved, published, spread_of(1.0, 10))
    assert rows[0]['finding'] and 'equal on every CPU kind measured' in rows[0]['verdict']
    rows, _ = ref.compare(near, published, None)
    assert not rows[1]['finding'] and 'no measured spread' in rows[1]['verdict']
    rows, _ = ref.compare([rec('mocov2', 7, 88.0, AVX2)], published, spread_of(1.0, 10))
    assert rows[0]['verdict'] == 'not published (another setting, or other seeds)'
    wide = dict(rec('mocov2', 0, 86.0, AVX2), backbone='resnet18')  # another setting
    rows, _ = ref.compare([wide], published, spread_of(1.0, 10))
    assert rows[0]['verdict'] == 'not published (another setting, or other seeds)'
    assert ref.check_lines(rows, _, 'ref')[-1] == ('  nothing to compare: the published records '
                                                   'hold another setting or other seeds')


def test_the_spread_is_the_pooled_seed_sd_checked_against_numpy():
    rng = np.random.default_rng(0)
    values = {name: {s: 85 + rng.normal() for s in range(6)} for name in ('a', 'b')}
    kinds = {name: [rec('mixco', s, v, host={'cpu': name, 'cpu_kernels': 'X'})
                    for s, v in vals.items()] for name, vals in values.items()}
    row = ref.measure_spread(kinds)['metrics'][0]
    arrays = [np.array(list(v.values()), dtype=np.float64) for v in values.values()]
    pooled = math.sqrt(sum(((a - a.mean()) ** 2).sum() for a in arrays) / (len(arrays[0]) * 2 - 2))
    assert row['df'] == 10 and row['sd'] == pytest.approx(pooled, rel=1e-12)
    diff = arrays[0] - arrays[1]
    assert row['cross_kind_sd'] == pytest.approx(math.sqrt((diff ** 2).mean() / 2), rel=1e-12)
    assert row['mean'] == {'a': pytest.approx(arrays[0].mean()), 'b': pytest.approx(arrays[1].mean())}
    assert row['equal_across_kinds'] is False


def test_a_kind_that_acts_as_a_new_seed_is_a_finding_about_one_time_in_a_hundred():
    """Simulated through measure_spread and compare: seeds drawn from one distribution on every
    kind (a new CPU kind re-draws the training noise), a spread from 2 kinds x 6 seeds, then a
    user with 2 seeds on a third kind against the published 2: findings at about the 1% level;
    a true shift of 6 seeds' sd (6 sd of the difference of two 2-seed means) nearly always."""
    rnd = random.Random(0)

    def records(name, seeds, shift=0.0):
        return [rec('mixco', s, 90 + shift + rnd.gauss(0, 1.5),
                    host={'cpu': name, 'cpu_kernels': 'X'}) for s in seeds]

    def finding(shift):
        spread = ref.measure_spread({k: records(k, range(6)) for k in ('a', 'b')})
        rows, _ = ref.compare(records('c', (0, 1), shift), records('a', (0, 1)), spread)
        return rows[0]['finding']
    runs = 3000
    null = sum(finding(0.0) for _ in range(runs)) / runs
    assert 0.004 <= null <= 0.02, null  # binomial sd at 1%: 0.0018
    assert sum(finding(9.0) for _ in range(300)) / 300 > 0.95


def write(folder, records):
    for record in records:
        write_record(record, str(folder))


def built(method, seed, knn, host):
    record = build_record(method=method, backbone='resnet18-w0.25', pretrain_data='digits',
                          pretrain_epochs=30, eval_data='digits', seed=seed, world_size=1,
                          total_batch=64, protocols={'knn': {'settings': {},
                                                             'metrics': {'top1': knn}}})
    record['host'].update(host)
    return record


def test_the_tool_checks_measures_and_publishes(tmp_path, capsys):
    published, yours, other = tmp_path / 'ref', tmp_path / 'yours', tmp_path / 'other'
    write(published, [built('mocov2', 0, 86.0, AVX512), built('mocov2', 1, 88.0, AVX512)])
    write(other, [built('mocov2', 0, 87.0, AVX2), built('mocov2', 1, 86.5, AVX2)])
    assert tool.main(['spread', str(published / 'spread.json'), str(published), str(other)]) == 0
    spread = json.loads((published / 'spread.json').read_text())
    assert spread['kinds'] == {ref.kind(built('x', 0, 0, AVX512)): [0, 1],
                               ref.kind(built('x', 0, 0, AVX2)): [0, 1]}
    write(yours, [built('mocov2', 0, 86.0, AVX512), built('mocov2', 1, 88.0, AVX512)])
    capsys.readouterr()
    assert tool.main(['check', str(yours), str(published), '--started', '0']) == 0
    out = capsys.readouterr().out
    assert 'MoCo-v2  kNN top1      87.00      87.00  equal, bit for bit' in out, out
    assert 'no finding' in out and 'The demo took' in out
    timing = json.loads((yours / ref.TIMING).read_text())
    assert timing['runs'] == 2 and timing['kind'] == ref.kind(built('x', 0, 0, AVX512))
    assert tool.main(['store', str(yours), str(published)]) == 0
    assert (published / 'spread.json').exists() and not (published / ref.TIMING).exists()
    assert len(list((published / 'runs').glob('*.json'))) == 2
    times = (published / ref.TIMES).read_text()
    assert f"| {timing['kind']} |" in times and times.count('| AMD EPYC') == 1
    with pytest.raises(ValueError, match=r'^spread: the folders hold records of 1 CPU kind\(s\)'):
        tool.main(['spread', str(tmp_path / 's.json'), str(yours)])


def test_what_the_demo_writes_is_ignored_by_git_and_the_reference_is_not():
    """make demo's folders (its records, tables, work dirs) leave a clone's status clean; the
    published reference is tracked."""
    import subprocess
    from benchmark.layout import REPO_ROOT
    paths = ['results/suites/demo_digits/runs/x.json', 'results/suites/demo_digits/index.html',
             'work_dirs/suites/demo_digits/run/epoch_1.pth', 'results/reference/demo_digits/x.json']
    out = subprocess.run(['git', 'check-ignore', *paths], cwd=REPO_ROOT, capture_output=True,
                         text=True).stdout.split()
    assert out == paths[:3]
