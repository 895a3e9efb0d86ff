"""run_protocols on small separable features: numbers, keys, aliases, NA instead of a crash."""
import numpy as np
import pytest

from benchmark.evaluation import protocols
from benchmark.evaluation.cluster import cluster_scores, select_classes
from benchmark.evaluation.protocols import run_protocols
from benchmark.names import CLUSTER


def _blobs(per_class, seed, classes=3, dim=4):
    """Tight blobs around the first `classes` unit vectors (scaled by 10)."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(classes), per_class)
    centers = 10 * np.eye(classes, dim)
    return (centers[labels] + 0.1 * rng.normal(size=(len(labels), dim))).astype(np.float32), labels


TRAIN, TEST = _blobs(12, 0), _blobs(4, 1)
FAST = dict(knn_k=5, linear_epochs=5, cluster_classes=3, cluster_per_class=6)


def test_separable_features_score_100_and_record_settings():
    out = run_protocols(TRAIN, TEST, 3, protocols=('knn', 'linear_fast', 'cluster'), **FAST)
    assert set(out) == {'knn', 'linear_fast', 'cluster'}
    assert out['knn'] == dict(settings=dict(k=5, temperature=0.1, split='train->test'),
                              metrics={'top1': 100.0})  # top5 skipped: only 3 classes
    assert out['linear_fast']['metrics'] == {'top1': 100.0}
    assert out['linear_fast']['settings'] == dict(
        epochs=5, seed=0, features='cached', lr=0.1, batch_size=256, weight_decay=0.0,
        schedule='cosine', selection='none (last epoch)')
    cluster = out['cluster']
    assert cluster['settings'] == dict(classes=3, per_class=6, split='train', seed=0)
    assert set(cluster['metrics']) == set(CLUSTER)
    assert cluster['metrics']['kmeans_nmi'] == pytest.approx(1.0)
    assert cluster['metrics']['kmeans_ari'] == pytest.approx(1.0)
    assert 0 < cluster['metrics']['davies_bouldin'] < 0.1  # tight, far-apart blobs


def test_knn_k_by_the_rule_is_recorded_with_it_and_used(monkeypatch):
    """Without knn_k the rule picks k from the bank's smallest class (12 -> 4) and says so;
    that k is the one the search gets."""
    seen = []
    real = protocols.knn_predict
    monkeypatch.setattr(protocols, 'knn_predict',
                        lambda *a, **kw: seen.append(a[4]) or real(*a, **kw))
    fast = dict(FAST, knn_k=None)
    out = run_protocols(TRAIN, TEST, 3, protocols=('knn',), **fast)
    assert out['knn']['settings'] == dict(k=4, temperature=0.1, split='train->test',
                                          k_rule='min(200, 0.4 x smallest class)')
    assert seen == [4] and out['knn']['metrics'] == {'top1': 100.0}


def test_linear_fast_records_the_schedule_it_ran(monkeypatch):
    """The settings recorded are the arguments the probe got, not a description beside them."""
    seen = {}
    monkeypatch.setattr(protocols, 'train_linear_probe',
                        lambda *a, **kw: seen.update(kw) or {'top1': 1.0})
    out = run_protocols(TRAIN, TEST, 3, protocols=('linear_fast',), **FAST)
    recorded = out['linear_fast']['settings']
    assert {k: seen[k] for k in ('lr', 'batch_size', 'weight_decay', 'epochs', 'seed')} == \
        {k: recorded[k] for k in ('lr', 'batch_size', 'weight_decay', 'epochs', 'seed')}


def test_tsne_alias_gives_cluster_tsne_scored_on_the_embedding(tmp_path, monkeypatch):
    """'tsne' -> 'cluster_tsne': the indices of the 2-D embedding of the subset, and its figure.

    t-SNE itself (seconds) is replaced by a fixed projection; tests/evaluation/test_cluster.py
    covers it.
    """
    seen = {}

    def embed(feats, seed):
        seen['rows'], seen['seed'] = len(feats), seed
        return feats[:, :2].astype(np.float64) * 2.0

    monkeypatch.setattr(protocols, 'tsne_embedding', embed)
    figure = tmp_path / 'sub' / 'tsne.png'
    out = run_protocols(TRAIN, TEST, 3, protocols=('tsne',), figure_path=str(figure), title='t',
                        seed=4, **FAST)
    assert set(out) == {'cluster_tsne'} and seen == {'rows': 18, 'seed': 4}
    entry = out['cluster_tsne']
    assert entry['settings'] == dict(classes=3, per_class=6, split='train', seed=4,
                                     embedding='tsne-2d', figure=str(figure))
    subset = select_classes(TRAIN[1], 3, 6, 4)
    expected = cluster_scores(TRAIN[0][subset, :2].astype(np.float64) * 2.0, TRAIN[1][subset], 4)
    assert entry['metrics'] == pytest.approx(expected, rel=1e-12)
    assert figure.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_a_protocol_that_cannot_run_reports_na_and_the_others_still_run():
    x_tr, y_tr = TRAIN
    bad_test = TEST[0].copy()
    bad_test[0, 0] = np.nan  # NaN test features: kNN and the probe cannot run ...
    one_class = (x_tr, np.zeros_like(y_tr))  # ... and one class leaves no cluster indices
    out = run_protocols((x_tr, y_tr), (bad_test, TEST[1]), 3,
                        protocols=('knn', 'linear_fast'), **FAST)
    for name in ('knn', 'linear_fast'):
        assert set(out[name]['metrics']) == {'top1', 'top5'}
        for value in out[name]['metrics'].values():
            assert value.startswith('NA(') and value.endswith(')') and 'NaN' in value
            assert '(' not in value[3:-1] and '\n' not in value  # one line, brackets swapped
    out = run_protocols(one_class, TEST, 3, protocols=('cluster', 'knn'), **FAST)
    assert out['cluster']['metrics'] == {name: out['cluster']['metrics']['davies_bouldin']
                                         for name in CLUSTER}
    assert out['cluster']['metrics']['davies_bouldin'].startswith(
        'NA(cluster: need 2 <= number of classes < number of samples')
    assert isinstance(out['knn']['metrics']['top1'], float)  # the other protocol still ran
    empty = (np.zeros((0, 4), np.float32), np.zeros(0, np.int64))  # k by the rule: no bank
    out = run_protocols(empty, TEST, 3, protocols=('knn',), **dict(FAST, knn_k=None))
    assert out['knn']['metrics']['top1'].startswith('NA(knn: the bank has no labels')


def test_unknown_protocol_raises():
    with pytest.raises(ValueError, match="unknown protocol 'linear'"):
        run_protocols(TRAIN, TEST, 3, protocols=('linear',))
    with pytest.raises(ValueError, match="unknown protocols \\['linear_paper'\\]"):
        run_protocols(TRAIN, TEST, 3, protocols=('knn', 'linear_paper'))
