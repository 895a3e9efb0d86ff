"""The dataset an evaluation reads: the pretraining data, or another data set for transfer."""
from typing import Optional

from mmengine.config import Config

from benchmark.data.eval_input import input_size_of
from benchmark.names import DATA_TYPES


def eval_dataset_cfg(cfg: Config, eval_data: Optional[str] = None,
                     data_root: Optional[str] = None) -> dict:
    """Dataset config for evaluation: the pretraining data, or `eval_data` (transfer)."""
    train = cfg.train_dataloader.dataset
    if eval_data is None:  # the pretraining data, with its bad_data policy if it has one
        policy = {'bad_data': train.bad_data} if 'bad_data' in train else {}
        return dict(type=train.type, data_root=data_root or train.get('data_root', ''),
                    input_size=input_size_of(train), **policy)
    if eval_data not in DATA_TYPES:
        raise ValueError(f'--eval-data {eval_data!r} unknown; choose from {sorted(DATA_TYPES)}')
    if data_root is None and eval_data != 'digits':
        raise ValueError(f'--eval-data {eval_data} needs --data-root (the folder of its files)')
    return dict(type=DATA_TYPES[eval_data], data_root=data_root or '',
                input_size=input_size_of(train))
