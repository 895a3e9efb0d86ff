"""Generated record sets of every shape a suite can produce, for the pages' tests: constant and
zero paired differences (quantised accuracies make them ordinary on a small test set), all
seeds equal, one seed, NA evaluations and a diverged run, a method without its baseline,
sixteen-plus seeds, ties among three methods and hundreds of rows. Each set is a list of
records made by ``build_record``, as a suite writes them."""
from typing import Dict, List

from benchmark.reports.records import build_record

STEP = 100 / 360  # one test image of 360, in top-1 points
PROTOCOLS = ('knn', 'linear_fast', 'online_linear', 'cluster')


def record(method: str, seed: int, top1, *, protocols=PROTOCOLS, overrides=None, status='ok',
           db=None, epochs: int = 30, eval_data: str = 'digits', time_s: float = 3.0) -> dict:
    """A digits record of `method` at `seed`: top-1 `top1` under every accuracy protocol (a
    number or an NA string), Davies-Bouldin `db` (default: from top1) under ``cluster``."""
    metrics = {}
    for protocol in protocols:
        if protocol == 'cluster':
            value = db if db is not None else (3.0 - top1 / 50 if isinstance(top1, float)
                                               else top1)
            metrics[protocol] = {'settings': {}, 'metrics': {
                'davies_bouldin': value, 'calinski_harabasz': 10.0, 'kmeans_nmi': 0.5,
                'kmeans_ari': 0.25}}
        else:
            metrics[protocol] = {'settings': {'k': 55} if protocol == 'knn' else {},
                                 'metrics': {'top1': top1}}
    overrides = overrides or {}
    return build_record(method=method, backbone='resnet18', pretrain_data='digits',
                        pretrain_epochs=epochs, eval_data=eval_data, seed=seed, world_size=1,
                        total_batch=64, time_s_per_epoch=time_s + 0.1 * seed,
                        peak_memory_gb=1.0, protocols=metrics, status=status,
                        config=f'configs/{method}_r18_digits.py',
                        setting_text=f'{method} {sorted(overrides.items())}', overrides=overrides)


def quantised(value: float) -> float:
    """`value` as an accuracy on 360 test images can be (a multiple of 1/360, in %)."""
    return round(value / STEP) * STEP


def _pair(base: List[float], diffs: List[float], **kw) -> List[dict]:
    out = [record('mocov2', s, quantised(b), **kw) for s, b in enumerate(base)]
    out += [record('mixco', s, quantised(b) + d, **kw) for s, (b, d) in enumerate(zip(base, diffs))]
    return out


def _base(n: int) -> List[float]:
    return [90.0 + (s % 4) * 0.8 for s in range(n)]


def record_sets() -> Dict[str, List[dict]]:
    """{name: records} of every degenerate kind, each set a section of its own (its own number
    of pretraining epochs), so that all of them fit one results folder."""
    knn = dict(protocols=('knn',))
    sets = {
        # one test image better on each of 7 seeds; and a constant +0.40
        'constant one image': _pair(_base(7), [STEP] * 7, protocols=('knn', 'cluster')),
        'constant +0.40': _pair(_base(7), [0.4] * 7, **knn),
        'constant at min_seeds': _pair(_base(5), [-STEP] * 5, protocols=('knn', 'cluster')),
        'constant, 18 seeds': _pair(_base(18), [2 * STEP] * 18, **knn),
        'zero differences': _pair(_base(7), [0.0] * 7, **knn),
        'all seeds equal': _pair([91.0] * 6, [0.0] * 6, protocols=('knn', 'linear_fast')),
        'one seed': _pair(_base(1), [STEP], **knn),
        'method without its baseline': [record('mixco', s, 90.0 + s, **knn) for s in range(3)]
        + [record('imix', s, 90.0, **knn) for s in range(6)],
    }
    na = _pair(_base(6), [STEP] * 6, protocols=('knn', 'linear_fast'))
    na.append(record('mixco', 6, 'NA(probe diverged)', protocols=('knn', 'linear_fast')))
    na.append(record('mocov2', 7, 'NA(no features)', protocols=('knn',)))
    na.append(record('mixco', 7, 'NA(nan)', status='diverged', **knn))
    na += [record('unmix', s, 'NA(not evaluated)', **knn) for s in range(3)]
    sets['NA evaluations'] = na
    sets['three methods tied'] = [record(method, s, 91.0, **knn) for s in range(6)
                                  for method in ('mocov2', 'mixco', 'imix', 'unmix')]
    two = dict(protocols=('knn', 'cluster'))
    many = [record('mocov2', s, quantised(90.0 + s * STEP), **two) for s in range(3)]
    for variant in range(50):
        many += [record('mixco', s, quantised(90.0 + (variant % 7) * 0.3 + s * STEP),
                        overrides={'model.mix_temperature': round(0.01 * (variant + 1), 2)},
                        **two) for s in range(3)]
    sets['hundreds of rows'] = many
    for epochs, records in enumerate(sets.values(), 1):
        for one in records:
            one['pretrain_epochs'] = epochs
    return sets
