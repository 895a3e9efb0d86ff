"""Datasets decoded from arrays: CIFAR-10/100 (the official python batches) and scikit-learn's
bundled digits (the embedded default of the demo)."""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
from mmengine.registry import DATASETS
from PIL import Image
from torchvision import transforms as T

from benchmark.data.base import DataRootError, ImageDataset, split_name

def unpickle(path: Path) -> Dict[str, Any]:
    # The official batches were pickled by Python 2: 'latin1' turns their str keys into
    # str (as torchvision reads them); keys that are bytes (re-dumped files) are decoded.
    with open(path, 'rb') as f:
        entry = pickle.load(f, encoding='latin1')
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in entry.items()}


@DATASETS.register_module()
class CIFAR10(ImageDataset):
    """CIFAR-10 from the official python pickle batches (``cifar-10-batches-py/``).

    Read directly rather than through torchvision, whose md5 checks reject generated test
    data. ``'val'`` and ``'test'`` both read ``test_batch``.

    Args:
        data_root: The folder that contains ``cifar-10-batches-py`` (torchvision's
            convention), or that folder itself.
        split: ``'train'``, ``'val'`` or ``'test'``.
        input_size: Output side of the view in pixels.
        view: A preset of ``benchmark.data.views`` or None for the PIL image.
    """

    FOLDER = 'cifar-10-batches-py'
    TRAIN_FILES = [f'data_batch_{i}' for i in range(1, 6)]
    TEST_FILES = ['test_batch']
    META_FILE = 'batches.meta'
    LABEL_KEY = 'labels'
    NAMES_KEY = 'label_names'
    KIND = 'cifar10'

    def __init__(self, data_root: str, split: str = 'train', input_size: int = 224,
                 view: Optional[Union[str, dict]] = 'mocov2') -> None:
        super().__init__(input_size, view)
        root, files = self._resolve(data_root, split)
        entries = [self._read(data_root, root / name) for name in files]
        meta = self._read(data_root, root / self.META_FILE)
        try:
            self.classes = [str(name) for name in meta[self.NAMES_KEY]]
            data = np.concatenate([np.asarray(e['data'], dtype=np.uint8) for e in entries])
            self.targets = [int(label) for e in entries for label in e[self.LABEL_KEY]]
            # Rows are CHW-flattened 32x32 RGB; keep HWC for PIL.
            self.data = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        except (KeyError, ValueError) as e:
            problem = f'is malformed: unexpected batch contents ({type(e).__name__}: {e})'
            raise self._error(data_root, problem) from None
        if len(self.data) != len(self.targets):
            raise self._error(data_root, f'is malformed: {len(self.data)} images, '
                                         f'{len(self.targets)} labels')

    @classmethod
    def _read(cls, data_root: str, path: Path) -> Dict[str, Any]:
        try:
            return unpickle(path)
        except Exception as e:  # noqa: BLE001 - garbage raises almost any error in pickle
            problem = f'is malformed: {path.name} is not a pickle batch ({type(e).__name__})'
            raise cls._error(data_root, problem) from None

    @classmethod
    def check_root(cls, data_root: str, split: str = 'train') -> None:
        """Raise DataRootError unless the batch files of ``split`` and the meta file exist."""
        cls._resolve(data_root, split)

    @classmethod
    def _error(cls, data_root: str, problem: str) -> DataRootError:
        hint = Path(data_root).parent if Path(data_root).name == cls.FOLDER else data_root
        files = ', '.join(cls.TRAIN_FILES + cls.TEST_FILES + [cls.META_FILE])
        expected = f'expected {cls.FOLDER}/ with {files}'
        return DataRootError(f'dataset root {data_root} {problem} ({expected}); '
                             f'run: python tools/prepare_data.py {cls.KIND} --root {hint}')

    @classmethod
    def _resolve(cls, data_root: str, split: str) -> Tuple[Path, List[str]]:
        root = Path(data_root)
        if (root / cls.FOLDER).is_dir():
            root = root / cls.FOLDER
        if not root.is_dir():
            raise cls._error(data_root, 'not found')
        files = cls.TRAIN_FILES if split_name(split) == 'train' else cls.TEST_FILES
        missing = [name for name in files + [cls.META_FILE] if not (root / name).is_file()]
        if len(missing) == len(files) + 1 and root.name != cls.FOLDER:
            missing = [f'{cls.FOLDER}/']
        if missing:
            raise cls._error(data_root, f"is malformed: missing {', '.join(missing)}")
        return root, files

    def _load(self, index: int) -> Image.Image:
        return Image.fromarray(self.data[index])


@DATASETS.register_module()
class CIFAR100(CIFAR10):
    """CIFAR-100 (fine labels) from the official pickles in ``cifar-100-python/``.

    Args:
        data_root: The folder that contains ``cifar-100-python``, or that folder itself.
        split: ``'train'``, ``'val'`` or ``'test'``.
        input_size: Output side of the view in pixels.
        view: A preset of ``benchmark.data.views`` or None for the PIL image.
    """

    FOLDER = 'cifar-100-python'
    TRAIN_FILES = ['train']
    TEST_FILES = ['test']
    META_FILE = 'meta'
    LABEL_KEY = 'fine_labels'
    NAMES_KEY = 'fine_label_names'
    KIND = 'cifar100'


@DATASETS.register_module()
class Digits(ImageDataset):
    """scikit-learn's bundled digits: 1,797 8x8 grey images of 10 classes, as RGB.

    The data ships inside scikit-learn, so there are no files and nothing to download;
    ``data_root`` is accepted for a uniform config and ignored. The split is a fixed
    stratified 80/20 split (1,437 train / 360 val images, ``random_state=0``).

    Args:
        data_root: Ignored (embedded data).
        split: ``'train'``, ``'val'`` or ``'test'``.
        input_size: Output side of the view in pixels (the view upsamples the 8x8 images).
        view: A preset of ``benchmark.data.views`` or None for the PIL image.
    """

    grey_to_rgb = T.Grayscale(num_output_channels=3)  # the grey value in all three channels

    def __init__(self, data_root: str = '', split: str = 'train', input_size: int = 224,
                 view: Optional[Union[str, dict]] = 'mocov2') -> None:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        super().__init__(input_size, view)
        digits = load_digits()
        train, val = train_test_split(np.arange(len(digits.target)), test_size=0.2,
                                      random_state=0, stratify=digits.target)
        keep = train if split_name(split) == 'train' else val
        # Pixel values are counts 0-16; scale to the 0-255 range the views expect.
        self.images = np.round(digits.images[keep] * (255 / 16)).astype(np.uint8)
        self.targets = digits.target[keep].tolist()
        self.classes = [str(name) for name in digits.target_names]

    @classmethod
    def check_root(cls, data_root: str = '', split: str = 'train') -> None:
        """Nothing to check: the data is embedded in scikit-learn."""
        split_name(split)

    def _load(self, index: int) -> Image.Image:
        return self.grey_to_rgb(Image.fromarray(self.images[index]))
