"""Config rules of the device views: the preprocessor and its raw_uint8 dataset come together.

`resolve_train_views` applies a config's ``train_views`` (where the training views are drawn:
``on='auto'`` puts them on the device when the run trains on CUDA, PIL in the loader workers
otherwise); `fill_view_size` completes the preprocessor's input size from the dataset's (so one
``--cfg-options`` changes both); `check_view_pairing` refuses a config that pairs them wrongly.
"""
from __future__ import annotations

from typing import Optional

from lightly.transforms.utils import IMAGENET_NORMALIZE

from benchmark.data.gpu_views import GPUViewPreprocessor, is_switch
from benchmark.data.raw_view import RAW_VIEW
from benchmark.data.view_params import view_spec


def device_views(cfg) -> Optional[dict]:
    model = cfg.get('model')
    pre = model.get('data_preprocessor') if isinstance(model, dict) else None
    if isinstance(pre, dict) and pre.get('type') in ('GPUViewPreprocessor', GPUViewPreprocessor):
        return pre
    return None


def train_dataset(cfg) -> dict:
    loader = cfg.get('train_dataloader')
    dataset = loader.get('dataset') if isinstance(loader, dict) else None
    return dataset if isinstance(dataset, dict) else {}


VIEWS_ON = ('auto', 'device', 'loader')
TRAIN_VIEWS_KEYS = ('on', 'raw_size', 'compile', 'graph', 'prefetch')


def views_path(cfg) -> str:
    """'device' when the model draws the training views, else 'loader' (PIL in the workers)."""
    return 'device' if device_views(cfg) is not None else 'loader'


def resolve_train_views(cfg, cuda: bool) -> str:
    """Apply and remove the config's ``train_views``; the views path the run takes.

    ``train_views = dict(on='auto', raw_size=None, compile=False, graph=False,
    prefetch=False)``:
    ``on='device'`` draws the training views on the model's device (the dataset's view preset
    moves to a GPUViewPreprocessor, the dataset hands out ``raw_uint8`` images, resized to
    ``raw_size`` first where its images differ in size), ``'loader'`` keeps PIL in the loader
    workers, ``'auto'`` is 'device' when ``cuda`` (the run trains on a CUDA device), else
    'loader'. ``compile``, ``graph``, ``prefetch``: the preprocessor's torch.compile, CUDA-graph
    and draw-ahead switches (off by default: no GPU run has measured them yet; ``'auto'`` turns
    each on where the run trains on CUDA). A config that names the
    preprocessor itself keeps it whatever ``on`` says.

    Raises:
        ValueError: One line naming a bad key or value.
    """
    spec = cfg.pop('train_views', None)
    if spec is None:
        return views_path(cfg)
    if not isinstance(spec, dict):
        raise ValueError(f"train_views must be a dict like dict(on='auto'), got {spec!r}")
    unknown = sorted(set(spec) - set(TRAIN_VIEWS_KEYS))
    if unknown:
        raise ValueError(f"train_views: unknown key {unknown[0]!r}; valid: "
                         f"{', '.join(TRAIN_VIEWS_KEYS)}")
    on = spec.get('on', 'auto')
    if on not in VIEWS_ON:
        raise ValueError(f"train_views.on={on!r}: not one of {', '.join(VIEWS_ON)}")
    if not isinstance(spec.get('compile', False), bool):
        raise ValueError(f"train_views.compile must be True or False, got {spec['compile']!r}")
    for key in ('graph', 'prefetch'):
        if not is_switch(spec.get(key, False)):
            raise ValueError(f"train_views.{key} must be 'auto', True or False, got "
                             f"{spec[key]!r}")
    if on == 'device' or (on == 'auto' and cuda):
        if device_views(cfg) is None:
            dataset = train_dataset(cfg)
            view = dataset.get('view', 'mocov2')
            raw_size = spec.get('raw_size')
            dataset['view'] = RAW_VIEW if raw_size is None else dict(name=RAW_VIEW,
                                                                     raw_size=raw_size)
            cfg['model']['data_preprocessor'] = dict(type='GPUViewPreprocessor', view=view,
                                                     compile=spec.get('compile', False),
                                                     graph=spec.get('graph', False),
                                                     prefetch=spec.get('prefetch', False))
            fill_view_size(cfg)
    return views_path(cfg)


def fill_view_size(cfg) -> None:
    """Set ``model.data_preprocessor.input_size`` from the train dataset's where it is left out,
    so ``--cfg-options train_dataloader.dataset.input_size=N`` changes the views too."""
    pre = device_views(cfg)
    if pre is not None and pre.get('input_size') is None:
        pre['input_size'] = train_dataset(cfg).get('input_size', 224)


def check_view_pairing(cfg) -> None:
    """Raise ValueError (one line) unless device views and a raw_uint8 dataset come together.

    Also checks the preprocessor's view preset and that its input_size (when given) is the
    dataset's, which evaluation uses.
    """
    pre, dataset = device_views(cfg), train_dataset(cfg)
    view = dataset.get('view', 'mocov2')
    raw = (view.get('name') if isinstance(view, dict) else view) == RAW_VIEW
    if pre is not None and not raw:
        raise ValueError(f"model.data_preprocessor.type=GPUViewPreprocessor draws the views on "
                         f"the device, but train_dataloader.dataset.view is {view!r}; set "
                         f"train_dataloader.dataset.view={RAW_VIEW} and the preset in "
                         f"model.data_preprocessor.view")
    if raw and pre is None:
        kind = cfg['model'].get('data_preprocessor') if isinstance(cfg.get('model'), dict) else None
        kind = kind.get('type', 'BaseDataPreprocessor') if isinstance(kind, dict) else kind
        raise ValueError(f"train_dataloader.dataset.view={RAW_VIEW} hands undecoded uint8 images "
                         f"to the model, which only GPUViewPreprocessor turns into views "
                         f"(model.data_preprocessor.type is {kind or 'BaseDataPreprocessor'}); set "
                         f"model.data_preprocessor=dict(type='GPUViewPreprocessor', view=...) "
                         f"or give the dataset a PIL view preset")
    if pre is None:
        return
    size, data_size = pre.get('input_size'), dataset.get('input_size', 224)
    if size is None and (isinstance(data_size, bool) or not isinstance(data_size, int)
                         or data_size < 1):
        raise ValueError(f'train_dataloader.dataset.input_size must be a positive integer (the '
                         f'views model.data_preprocessor draws take its size), got {data_size!r}')
    if size is not None and size != data_size:
        raise ValueError(f'model.data_preprocessor.input_size={size} differs from '
                         f'train_dataloader.dataset.input_size={data_size} (the size evaluation '
                         f'uses); leave model.data_preprocessor.input_size out to follow it')
    try:
        view_spec(pre.get('view', 'mocov2'), data_size,
                  pre.get('normalize', IMAGENET_NORMALIZE))
    except (ValueError, TypeError) as err:
        raise ValueError(f'model.data_preprocessor.view: {err}') from None
