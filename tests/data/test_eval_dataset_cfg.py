"""eval_dataset_cfg: the pretraining data by default, a transfer data set by name."""
import pytest
from mmengine.config import Config

from benchmark.data.eval_input import eval_dataset_cfg


def cfg(**dataset):
    return Config(dict(train_dataloader=dict(dataset=dict(type='TinyImageNet', **dataset))))


def test_pretraining_data_keeps_type_root_size_and_bad_data_policy():
    out = eval_dataset_cfg(cfg(data_root='data/tiny', input_size=64, bad_data='skip'))
    assert out == dict(type='TinyImageNet', data_root='data/tiny', input_size=64, bad_data='skip')
    assert eval_dataset_cfg(cfg(data_root='a'), data_root='b')['data_root'] == 'b'
    assert eval_dataset_cfg(cfg())['input_size'] == 224 and 'bad_data' not in eval_dataset_cfg(cfg())


def test_transfer_data_by_name_needs_a_root_except_digits():
    assert eval_dataset_cfg(cfg(input_size=32), 'cifar10', 'data/c10') == dict(
        type='CIFAR10', data_root='data/c10', input_size=32)
    assert eval_dataset_cfg(cfg(), 'digits')['type'] == 'Digits'
    with pytest.raises(ValueError, match='needs --data-root'):
        eval_dataset_cfg(cfg(), 'cifar100')
    with pytest.raises(ValueError, match="unknown; choose from"):
        eval_dataset_cfg(cfg(), 'mnist')
