"""What every dataset of the suite shares: errors, the bad-data policy, the view, seeded items.

Every dataset reads its official on-disk format (no reorganisation script), takes
``data_root, split, input_size, view`` and returns ``dict(inputs=<view output>,
data_samples=<int label>)``. The layout is checked in the constructor, before any image is
loaded, and by ``check_root`` without building the dataset; a bad root raises
``DataRootError`` with a one-line message that says what to run.
"""
from __future__ import annotations

import inspect
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from PIL import Image
from torch.utils.data import Dataset

from benchmark.data.sampler import SampleKey
from benchmark.data.scan import to_rgb
from benchmark.data.seeding import seeded_rng
from benchmark.data.views import build_view


Samples = List[Tuple[str, int]]
BAD_DATA = ('strict', 'skip')
SKIP_HINT = 'set train_dataloader.dataset.bad_data=skip'


class DataRootError(FileNotFoundError):
    """A dataset root is missing or does not have the expected layout."""


class BadImageError(DataRootError):
    """An image file broke after the pre-flight check (``bad_data='strict'``); one line.

    Raised in a DataLoader worker, it is re-raised in the main process as
    ``BadImageError('Caught BadImageError in DataLoader worker process 0.\\nOriginal
    Traceback ...')``: that is cut back to the original line, so the error stays one line.
    """

    def __init__(self, message: str = '') -> None:
        head, _, rest = message.partition('\n')
        if head.startswith(f'Caught {type(self).__name__} ') and 'Traceback' in rest:
            where = head[len(f'Caught {type(self).__name__} '):].rstrip('.')
            last = rest.rstrip().rsplit('\n', 1)[-1]
            message = f"{last.split(': ', 1)[-1]} ({where})"
        super().__init__(message)


def split_name(split: str) -> str:
    """Map a split name to 'train' or 'val' ('test' is an alias of 'val')."""
    if split not in ('train', 'val', 'test'):
        raise ValueError(f"unknown split {split!r}; valid splits: 'train', 'val', 'test'")
    return 'train' if split == 'train' else 'val'


def identity(image: Image.Image) -> Image.Image:
    return image


def load_rgb(path: str) -> Image.Image:
    with open(path, 'rb') as f:
        return to_rgb(Image.open(f))


def check_bad_data_policy(bad_data: str) -> None:
    if bad_data not in BAD_DATA:
        raise ValueError(f"bad_data={bad_data!r} unknown; valid: {', '.join(BAD_DATA)}")


def view_of(input_size: int, view: Optional[Union[str, dict]]) -> Callable:
    """The view a dataset applies (`build_view`; None: the decoded PIL image, which tests and
    feature dumps want), once ``input_size`` is an integer >= 8."""
    if isinstance(input_size, bool) or not isinstance(input_size, int) or input_size < 8:
        raise ValueError(f'input_size must be an integer >= 8, got {input_size!r}')
    # identity, a module-level function, keeps the dataset picklable for workers
    return identity if view is None else build_view(view, input_size)


def examples_of(data_root: str, paths: List[str], count: int = 2) -> str:
    return ', '.join(os.path.relpath(p, data_root) for p in paths[:count])


class ImageDataset(Dataset):
    """Labels, class names and the view; subclasses set ``classes``/``targets`` and load images."""

    classes: List[str]
    targets: List[int]
    # How the data's grey images become the RGB the views take: a step the dataset applies
    # (a torchvision transform, which an exported encoder's sidecar writes out), a rule in words
    # where each file is converted as it is read, or None where the data is RGB.
    grey_to_rgb: Union[None, str, Callable] = None

    def __init__(self, input_size: int, view: Optional[Union[str, dict]]) -> None:
        self.transform: Callable = view_of(input_size, view)

    @classmethod
    def check_arguments(cls, **kwargs: Any) -> None:
        """Refuse, before any file is read, what the constructor would: an unknown or missing
        argument, the split, the bad-data policy, the input size and the view (built, then
        dropped). The config check calls this in place of the constructor."""
        bound = inspect.signature(cls).bind(**kwargs)
        bound.apply_defaults()
        args = bound.arguments
        split_name(args.get('split', 'train'))
        if 'bad_data' in args:
            check_bad_data_policy(args['bad_data'])
        view_of(args.get('input_size', 224), args.get('view'))

    def _load(self, index: int) -> Image.Image:
        raise NotImplementedError

    @property
    def metainfo(self) -> Dict[str, Any]:
        """Metadata read by mmengine (checkpoint meta, visualisers)."""
        return dict(classes=list(self.classes))

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, key: Union[int, SampleKey]) -> Dict[str, Any]:
        # ResumableSampler hands out (index, seed): the views of that sample are drawn from
        # the seed, so they do not depend on the worker or on an interruption.
        if isinstance(key, SampleKey):
            with seeded_rng(key.seed):
                item = self._item(key.index)
            if getattr(self.transform, 'carries_seed', False):  # raw_uint8: views drawn later
                item['seed'] = key.seed
            return item
        return self._item(key)

    def _item(self, index: int) -> Dict[str, Any]:
        return dict(inputs=self.transform(self._load(index)), data_samples=int(self.targets[index]))

