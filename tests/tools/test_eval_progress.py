"""tools/eval.py says as each part of the evaluation starts and ends, with its time: the
protocols on extracted features, then linear_paper (its own run); the record holds both."""
from tools import eval as eval_tool


def test_a_line_as_the_feature_protocols_start_and_end(tmp_path, run_main):
    from benchmark.data.fakes import make_fake_cifar
    root = make_fake_cifar(tmp_path / 'data', 'cifar10', train_per_class=6, test_per_class=2)
    code, out, err, _ = run_main(eval_tool, 'configs/mixco_r18_tiny.py', 'random',
                                 '--eval-data', 'cifar10', '--data-root', root, '--results-dir',
                                 tmp_path, '--protocols', 'knn', 'linear_fast', '--num-workers',
                                 '0', '--cfg-options', 'train_dataloader.dataset.input_size=32')
    assert code == 0, err[-2000:]
    lines = out.splitlines()
    started = lines.index('knn, linear_fast: started')
    assert lines[started + 1].startswith('knn, linear_fast: done in ')
    assert lines[started + 1].endswith('s')


def test_linear_paper_is_its_own_part_and_the_record_holds_every_protocol(tmp_path, run_main,
                                                                          monkeypatch):
    calls = []

    def evaluate(cfg, checkpoint, protocols, *args, **kwargs):
        calls.append(list(protocols))
        return dict(protocols={p: {'settings': {}, 'metrics': {'top1': 50.0}} for p in protocols},
                    run=dict(method='mixco', backbone='resnet18', pretrain_data='digits',
                             pretrain_epochs=0, seed=0, world_size=None, total_batch=None),
                    eval_data='digits', layout='random-init', meta={})

    recorded = {}
    monkeypatch.setattr(eval_tool, 'evaluate_checkpoint', evaluate)
    monkeypatch.setattr(eval_tool, 'record_evaluation',
                        lambda protocols, *a, **k: recorded.update(protocols) or tmp_path / 'r.json')
    monkeypatch.setattr(eval_tool, 'write_run_report', lambda *a: tmp_path / 'report.md')
    code, out, err, _ = run_main(eval_tool, 'configs/mixco_r18_digits.py', 'random',
                                 '--protocols', 'linear_paper', 'knn', 'tsne')
    assert code == 0, err[-2000:]
    assert calls == [['knn', 'cluster_tsne'], ['linear_paper']]
    lines = out.splitlines()
    assert lines[0] == 'knn, cluster_tsne: started' and lines[2] == 'linear_paper: started'
    assert lines[1].startswith('knn, cluster_tsne: done in ')
    assert lines[3].startswith('linear_paper: done in ')
    assert sorted(recorded) == ['cluster_tsne', 'knn', 'linear_paper']
