"""Where the training views are drawn: a config's ``train_views`` applied, the preprocessor's
input size completed from the dataset's and the pair checked (`place_views`; the size alone:
`fill_view_size`)."""
from benchmark.data.gpu_views import GPUViewPreprocessor, is_switch
from benchmark.data.raw_view import RAW_VIEW
from benchmark.engine.config.rules import Rows, refuse

TRAIN_VIEWS: Rows = [  # facts: spec (the config's train_views)
    (lambda f: not isinstance(f.spec, dict),
     "train_views must be a dict like dict(on='auto'), got {spec!r}"),
    (lambda f: sorted(set(f.spec) - {'on', 'raw_size', 'compile', 'graph', 'prefetch'}),
     "train_views: unknown key {it[0]!r}; valid: on, raw_size, compile, graph, prefetch"),
    (lambda f: f.spec.get('on', 'auto') not in ('auto', 'device', 'loader'),
     "train_views.on={spec[on]!r}: not one of auto, device, loader"),
    (lambda f: not isinstance(f.spec.get('compile', False), bool),
     'train_views.compile must be True or False, got {spec[compile]!r}'),
    (lambda f: not is_switch(f.spec.get('graph', 'auto')),
     "train_views.graph must be 'auto', True or False, got {spec[graph]!r}"),
    (lambda f: not is_switch(f.spec.get('prefetch', 'auto')),
     "train_views.prefetch must be 'auto', True or False, got {spec[prefetch]!r}"),
]
PAIRING: Rows = [  # facts of `check_pairing`: device views and their raw_uint8
    # dataset (a bad view preset is the preprocessor's to refuse)
    (lambda f: f.pre is not None and not f.raw,
     'model.data_preprocessor.type=GPUViewPreprocessor draws the views on the device, but '
     'train_dataloader.dataset.view is {view!r}; set train_dataloader.dataset.view=raw_uint8 '
     'and the preset in model.data_preprocessor.view'),
    (lambda f: f.raw and f.pre is None,
     'train_dataloader.dataset.view=raw_uint8 hands undecoded uint8 images to the model, which '
     'only GPUViewPreprocessor turns into views (model.data_preprocessor.type is {kind}); set '
     "model.data_preprocessor=dict(type='GPUViewPreprocessor', view=...) or give the dataset a "
     'PIL view preset'),
    (lambda f: f.pre is not None and f.size is None and (
        isinstance(f.data_size, bool) or not isinstance(f.data_size, int) or f.data_size < 1),
     'train_dataloader.dataset.input_size must be a positive integer (the views '
     'model.data_preprocessor draws take its size), got {data_size!r}'),
    (lambda f: f.pre is not None and f.size is not None and f.size != f.data_size,
     'model.data_preprocessor.input_size={size} differs from train_dataloader.dataset.input_size='
     '{data_size} (the size evaluation uses); leave model.data_preprocessor.input_size out to '
     'follow it'),
]


def device_views(cfg) -> dict:
    """The config's GPUViewPreprocessor section, or None."""
    model = cfg.get('model')
    pre = model.get('data_preprocessor') if isinstance(model, dict) else None
    types = ('GPUViewPreprocessor', GPUViewPreprocessor)
    return pre if isinstance(pre, dict) and pre.get('type') in types else None


def train_dataset(cfg) -> dict:
    loader = cfg.get('train_dataloader')
    dataset = loader.get('dataset') if isinstance(loader, dict) else None
    return dataset if isinstance(dataset, dict) else {}


def views_path(cfg) -> str:
    """'device' when the model draws the training views, else 'loader' (PIL in the workers)."""
    return 'device' if device_views(cfg) is not None else 'loader'


def place_views(cfg, cuda: bool) -> str:
    """Apply and remove ``train_views = dict(on='auto', raw_size=None, compile=False,
    graph='auto', prefetch='auto')``, check the pair (`check_pairing`) and fill the views' size
    (`fill_view_size`); the views path the run takes.

    'device' (``'auto'`` where `cuda`) moves the dataset's view preset to a GPUViewPreprocessor
    with those switches and has the dataset hand out ``raw_uint8`` images (resized to
    ``raw_size`` first where given); a config that names the preprocessor itself keeps it, and
    one without a model (or whose model is no dict) is left for the section check to name.
    """
    spec = cfg.pop('train_views', None)
    if spec is not None:
        refuse(TRAIN_VIEWS, spec=spec)
        on = spec.get('on', 'auto')
        if (on == 'device' or (on == 'auto' and cuda)) and isinstance(cfg.get('model'), dict) \
                and device_views(cfg) is None:
            dataset = train_dataset(cfg)
            view, raw_size = dataset.get('view', 'mocov2'), spec.get('raw_size')
            dataset['view'] = RAW_VIEW if raw_size is None else dict(name=RAW_VIEW,
                                                                     raw_size=raw_size)
            cfg['model']['data_preprocessor'] = dict(
                type='GPUViewPreprocessor', view=view, compile=spec.get('compile', False),
                graph=spec.get('graph', 'auto'), prefetch=spec.get('prefetch', 'auto'))
    check_pairing(cfg)
    fill_view_size(cfg)
    return views_path(cfg)


def check_pairing(cfg) -> None:
    """Device views need a ``raw_uint8`` dataset and the other way round, at one input size."""
    pre, dataset, model = device_views(cfg), train_dataset(cfg), cfg.get('model')
    view = dataset.get('view', 'mocov2')
    kind = model.get('data_preprocessor') if isinstance(model, dict) else None
    refuse(PAIRING, pre=pre, view=view, data_size=dataset.get('input_size', 224),
           raw=(view.get('name') if isinstance(view, dict) else view) == RAW_VIEW,
           size=(pre or {}).get('input_size'),
           kind=(kind.get('type') if isinstance(kind, dict) else kind) or 'BaseDataPreprocessor')


def fill_view_size(cfg, like=None) -> None:
    """Set ``model.data_preprocessor.input_size`` from the train dataset's (of `like` where
    given) where it is left out, so ``train_dataloader.dataset.input_size=N`` sizes the views."""
    pre = device_views(cfg)
    if pre is not None and pre.get('input_size') is None:
        pre['input_size'] = train_dataset(cfg if like is None else like).get('input_size', 224)
