"""What the evaluations feed an encoder, as data and as one torchvision expression.

Every evaluation (kNN, probes, cluster indices, the monitors) reads the dataset
`eval_dataset_cfg` names (the pretraining data, or another data set for transfer) with the view
``EVAL_VIEW`` at the input size the run's config gives the dataset (`input_size_of`). `eval_input`
describes that view for an exported encoder's sidecar: it builds the view with the code the
dataset runs (`view_of`) and reads the sizes, the interpolation and the normalisation off the
torchvision steps it is made of, so the description cannot drift from what was evaluated. Where
the data is grey, the dataset's ``grey_to_rgb`` step comes first.
"""
from __future__ import annotations

import inspect
from typing import Callable, Dict, List, Optional, Tuple

from mmengine.config import Config
from mmengine.registry import DATASETS
from torchvision import transforms as T

from benchmark.data.base import view_of
from benchmark.names import DATA_TYPES

EVAL_VIEW = 'test'  # the view every evaluation reads its data with
TV = 'torchvision.transforms'  # how the expression names torchvision's transforms


def dataset_class(dataset_cfg: dict) -> type:
    """The registered dataset class a dataset config's ``type`` names."""
    cls = DATASETS.get(dataset_cfg.get('type'))
    if cls is None:
        raise ValueError(f"dataset type {dataset_cfg.get('type')!r} is not registered; "
                         'name one of benchmark/data/')
    return cls


def input_size_of(dataset_cfg: dict) -> int:
    """The input size of a dataset config: its ``input_size``, else the dataset's default."""
    if 'input_size' in dataset_cfg:
        return dataset_cfg['input_size']
    return inspect.signature(dataset_class(dataset_cfg)).parameters['input_size'].default


def eval_dataset_cfg(cfg: Config, eval_data: Optional[str] = None,
                     data_root: Optional[str] = None) -> dict:
    """Dataset config for evaluation: the pretraining data, or `eval_data` (transfer)."""
    train = (cfg.get('train_dataloader') or {}).get('dataset')
    if not isinstance(train, dict) or 'type' not in train:
        raise ValueError("no train_dataloader.dataset with a type: the evaluations' input "
                         'comes from it')
    if eval_data is None:  # the pretraining data, with its bad_data policy if it has one
        policy = {'bad_data': train['bad_data']} if 'bad_data' in train else {}
        return dict(type=train['type'], data_root=data_root or train.get('data_root', ''),
                    input_size=input_size_of(train), **policy)
    if eval_data not in DATA_TYPES:
        raise ValueError(f'--eval-data {eval_data!r} unknown; choose from {sorted(DATA_TYPES)}')
    if data_root is None and eval_data != 'digits':
        raise ValueError(f'--eval-data {eval_data} needs --data-root (the folder of its files)')
    return dict(type=DATA_TYPES[eval_data], data_root=data_root or '',
                input_size=input_size_of(train))


def _side(size) -> object:
    """A size as the sidecar writes it: one number for a square, else [height, width]."""
    size = list(size) if isinstance(size, (list, tuple)) else [size]
    return size[0] if len(set(size)) == 1 else size


def _resize(step: T.Resize) -> Tuple[str, dict]:
    size = list(step.size) if isinstance(step.size, (list, tuple)) else step.size
    return (f'{TV}.Resize({size!r}, interpolation={TV}.InterpolationMode.'
            f'{step.interpolation.name}, max_size={step.max_size!r}, '
            f'antialias={step.antialias!r})',
            dict(resize=_side(size), interpolation=step.interpolation.value,
                 antialias=step.antialias))


def _crop(step: T.CenterCrop) -> Tuple[str, dict]:
    return f'{TV}.CenterCrop({list(step.size)!r})', dict(center_crop=_side(step.size))


def _normalize(step: T.Normalize) -> Tuple[str, dict]:
    mean, std = [float(v) for v in step.mean], [float(v) for v in step.std]
    return f'{TV}.Normalize(mean={mean!r}, std={std!r})', dict(normalize=dict(mean=mean, std=std))


def _grey(step: T.Grayscale) -> Tuple[str, dict]:
    expression = f'{TV}.Grayscale(num_output_channels={step.num_output_channels})'
    return expression, dict(grey_to_rgb=expression)


# Each step an evaluation view may hold -> its expression and its data fields.
STEPS: Dict[type, Callable[..., Tuple[str, dict]]] = {
    T.Grayscale: _grey, T.Resize: _resize, T.CenterCrop: _crop,
    T.ToTensor: lambda step: (f'{TV}.ToTensor()', {}), T.Normalize: _normalize}


def describe_steps(steps: List[Callable]) -> Tuple[str, dict]:
    """(one ``torchvision.transforms.Compose`` expression, the steps' data fields)."""
    expressions, fields = [], {}
    for step in steps:
        render = STEPS.get(type(step))
        if render is None:
            raise ValueError(f'evaluation view step {type(step).__name__} has no torchvision '
                             f'expression; add it to STEPS in {__name__}')
        expression, found = render(step)
        expressions.append(expression)
        fields.update(found)
    return f"{TV}.Compose([{', '.join(expressions)}])", fields


def eval_input(dataset_cfg: dict) -> dict:
    """How the evaluations of a run on ``dataset_cfg`` (its ``type`` and ``input_size``) feed
    the encoder: ``input_size``, ``grey_to_rgb`` (the step or rule that makes the data's grey
    images RGB; None where the data is RGB), ``resize`` (the shorter side), ``interpolation``,
    ``antialias``, ``center_crop``, ``normalize`` (mean, std) and ``transform``: all of it as
    one expression over torch, torchvision and a PIL image (``eval`` it with ``torchvision``
    imported)."""
    cls = dataset_class(dataset_cfg)
    size = input_size_of(dataset_cfg)
    view = view_of(size, EVAL_VIEW)  # what the dataset applies to each image
    grey = getattr(cls, 'grey_to_rgb', None)
    steps = ([grey] if callable(grey) else []) + list(view.transforms)
    transform, fields = describe_steps(steps)
    return dict(input_size=size, grey_to_rgb=fields.pop('grey_to_rgb', grey), **fields,
                transform=transform)
