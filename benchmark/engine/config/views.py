"""Where the training views are drawn: a config's ``train_views`` applied, the preprocessor's
input size completed from the dataset's (the pairing rules: rules.PAIRING)."""
from benchmark.data.raw_view import RAW_VIEW
from benchmark.engine.config.rules import TRAIN_VIEWS, device_views, refuse, train_dataset

__all__ = ['device_views', 'fill_view_size', 'resolve_train_views', 'train_dataset', 'views_path']


def views_path(cfg) -> str:
    """'device' when the model draws the training views, else 'loader' (PIL in the workers)."""
    return 'device' if device_views(cfg) is not None else 'loader'


def resolve_train_views(cfg, cuda: bool) -> str:
    """Apply and remove ``train_views = dict(on='auto', raw_size=None, compile=False,
    graph=False, prefetch=False)``; the views path the run takes (rules.TRAIN_VIEWS: one line).

    ``on='device'`` moves the dataset's view preset to a GPUViewPreprocessor and has the dataset
    hand out ``raw_uint8`` images (resized to ``raw_size`` first where given), ``'loader'`` keeps
    PIL in the loader workers, ``'auto'`` is 'device' where ``cuda`` (the run trains on CUDA).
    ``compile``, ``graph``, ``prefetch``: the preprocessor's torch.compile, CUDA-graph and
    draw-ahead switches (``'auto'``: on where the run trains on CUDA). A config that names the
    preprocessor itself keeps it whatever ``on`` says.
    """
    spec = cfg.pop('train_views', None)
    if spec is None:
        return views_path(cfg)
    refuse(TRAIN_VIEWS, spec=spec)
    on = spec.get('on', 'auto')
    if (on == 'device' or (on == 'auto' and cuda)) and device_views(cfg) is None:
        dataset = train_dataset(cfg)
        view, raw_size = dataset.get('view', 'mocov2'), spec.get('raw_size')
        dataset['view'] = RAW_VIEW if raw_size is None else dict(name=RAW_VIEW, raw_size=raw_size)
        cfg['model']['data_preprocessor'] = dict(
            type='GPUViewPreprocessor', view=view, compile=spec.get('compile', False),
            graph=spec.get('graph', False), prefetch=spec.get('prefetch', False))
        fill_view_size(cfg)
    return views_path(cfg)


def fill_view_size(cfg) -> None:
    """Set ``model.data_preprocessor.input_size`` from the train dataset's where it is left out,
    so ``--cfg-options train_dataloader.dataset.input_size=N`` changes the views too."""
    pre = device_views(cfg)
    if pre is not None and pre.get('input_size') is None:
        pre['input_size'] = train_dataset(cfg).get('input_size', 224)
