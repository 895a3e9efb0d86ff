"""tools/eval.py evaluates an external checkpoint and a random encoder on another dataset, and
writes a record naming what it evaluated. In-process, at the tiniest sizes."""
import json

from torchvision.models import resnet18

from tools import eval as eval_tool


def test_eval_tool_on_authors_checkpoint(tmp_path, fake_tiny, run_main):
    """tools/eval.py takes an external checkpoint and writes a record naming its layout."""
    import torch
    source = resnet18()
    state = {f'module.encoder_q.{k}': v for k, v in source.state_dict().items()}
    torch.save({'state_dict': state}, tmp_path / 'authors.pth.tar')
    code, out, err, _ = run_main(eval_tool, 'configs/mixco_r18_tiny.py',
                                 tmp_path / 'authors.pth.tar', '--data-root', fake_tiny,
                                 '--results-dir', tmp_path, '--protocols', 'knn', 'cluster',
                                 '--num-workers', '0', '--cfg-options',
                                 'train_dataloader.dataset.input_size=32')
    assert code == 0, err[-2000:]
    record = json.loads(next((tmp_path / 'runs').glob('*.json')).read_text())
    assert record['extra']['checkpoint_layout'] == 'moco-authors'
    assert record['method'] == 'mixco (moco-authors)'
    assert 0 <= record['protocols']['knn']['metrics']['top1'] <= 100


def test_eval_tool_transfer_to_cifar(tmp_path, run_main):
    """--eval-data cifar10 probes the encoder on CIFAR-10 files (the paper's transfer rows)."""
    from benchmark.data.fakes import make_fake_cifar
    root = make_fake_cifar(tmp_path / 'data', 'cifar10', train_per_class=6, test_per_class=2)
    code, out, err, _ = run_main(eval_tool, 'configs/mixco_r18_tiny.py', 'random',
                                 '--eval-data', 'cifar10', '--data-root', root, '--results-dir',
                                 tmp_path, '--protocols', 'knn', 'linear_fast', '--num-workers',
                                 '0', '--cfg-options', 'train_dataloader.dataset.input_size=32')
    assert code == 0, err[-2000:]
    record = json.loads(next((tmp_path / 'runs').glob('*.json')).read_text())
    assert (record['pretrain_data'], record['eval_data']) == ('tiny-imagenet', 'cifar10')
    assert set(record['protocols']) == {'knn', 'linear_fast'}
