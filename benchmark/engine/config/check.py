"""`validate_config`: what a config names, built without data, then the rules across keys; a
refusal is one `ConfigError` line naming the key path."""
import copy
import os
import warnings
from typing import Optional

import torch
from mmengine.config import Config

from benchmark.data.raw_view import RAW_VIEW
from benchmark.engine.config.build import check_sections
from benchmark.engine.config.rules import PAIRING, check_run, check_values, refuse
from benchmark.engine.config_file import import_custom_modules
from benchmark.engine.train_views import (device_views, fill_view_size, resolve_train_views,
                                          train_dataset)


def validate_config(cfg: Config, world_size: Optional[int] = None,
                    cuda: Optional[bool] = None) -> None:
    """Check a loaded config (left as it is) for a run of `world_size` processes (default:
    torchrun's WORLD_SIZE, else 1) training on CUDA where `cuda` (default: where available)."""
    import_custom_modules(cfg.get('custom_imports'))
    top = cfg.to_dict() if isinstance(cfg, Config) else copy.deepcopy(dict(cfg))
    check_values(top)
    resolve_train_views(top, torch.cuda.is_available() if cuda is None else cuda)
    check_pairing(top)
    fill_view_size(top)  # as launch.load_config does before the model is built
    with warnings.catch_warnings():  # e.g. torch's on more workers than cores: the run warns
        warnings.simplefilter('ignore')
        check_sections(top)
    if world_size is None:  # tools/dist_train.sh sets WORLD_SIZE for its check as well
        try:
            world_size = max(1, int(os.environ.get('WORLD_SIZE', '1')))
        except ValueError:
            world_size = 1
    check_run(top, world_size)


def check_pairing(cfg) -> None:
    """Device views need a ``raw_uint8`` dataset and the other way round, at one input size."""
    pre, dataset, model = device_views(cfg), train_dataset(cfg), cfg.get('model')
    view = dataset.get('view', 'mocov2')
    kind = model.get('data_preprocessor') if isinstance(model, dict) else None
    refuse(PAIRING, pre=pre, view=view, data_size=dataset.get('input_size', 224),
           raw=(view.get('name') if isinstance(view, dict) else view) == RAW_VIEW,
           size=(pre or {}).get('input_size'),
           kind=(kind.get('type') if isinstance(kind, dict) else kind) or 'BaseDataPreprocessor')
