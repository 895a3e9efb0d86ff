"""Datasets of the benchmark, registered in mmengine's root ``DATASETS`` registry.

Every dataset reads its official on-disk format (no reorganisation script), takes
``data_root, split, input_size, view`` and returns ``dict(inputs=<view output>,
data_samples=<int label>)``. The layout is checked in the constructor, before any
image is loaded, and by ``check_root`` without building the dataset; a bad root raises
``DataRootError`` with a one-line message that says what to run.

The folder datasets (Tiny-ImageNet, ImageFolder) then decode every image file once
(``benchmark.data_scan``, cached) and apply ``bad_data``: ``'strict'`` raises
``DataRootError`` naming the bad files, ``'skip'`` drops them and counts them in
``skipped_files``. ``check_images`` runs the same check without building the dataset.
"""
from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from mmengine.logging import print_log
from mmengine.registry import DATASETS
from PIL import Image
from torch.utils.data import Dataset
from torchvision.datasets.folder import IMG_EXTENSIONS

from benchmark.data_scan import LABELS, ScanReport, check_image, scan_image_files, to_rgb
from benchmark.rng_state import seeded_rng
from benchmark.sampler import SampleKey
from benchmark.views import build_view

Samples = List[Tuple[str, int]]
BAD_DATA = ('strict', 'skip')
SCAN_CACHE = '.image_scan.json'  # results of the image check, in the data root
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


def _split(split: str) -> str:
    """Map a split name to 'train' or 'val' ('test' is an alias of 'val')."""
    if split not in ('train', 'val', 'test'):
        raise ValueError(f"unknown split {split!r}; valid splits: train, val, test")
    return 'train' if split == 'train' else 'val'


def _identity(image: Image.Image) -> Image.Image:
    return image


def _load_rgb(path: str) -> Image.Image:
    with open(path, 'rb') as f:
        return to_rgb(Image.open(f))


def _check_policy(bad_data: str) -> None:
    if bad_data not in BAD_DATA:
        raise ValueError(f"bad_data={bad_data!r} unknown; valid: {', '.join(BAD_DATA)}")


def _examples(data_root: str, paths: List[str], count: int = 2) -> str:
    return ', '.join(os.path.relpath(p, data_root) for p in paths[:count])


class _ImageDataset(Dataset):
    """Labels, class names and the view; subclasses set ``classes``/``targets`` and load images."""

    classes: List[str]
    targets: List[int]

    def __init__(self, input_size: int, view: Optional[Union[str, dict]]) -> None:
        # view=None returns the decoded PIL image, which tests and feature dumps want; a
        # module-level function rather than a lambda keeps the dataset picklable for workers.
        self.transform: Callable = _identity if view is None else build_view(view, input_size)

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


class _FolderDataset(_ImageDataset):
    """Image files on disk: every file is checked once before use, per ``bad_data``."""

    def __init__(self, data_root: str, split: str, input_size: int,
                 view: Optional[Union[str, dict]], bad_data: str) -> None:
        super().__init__(input_size, view)
        _check_policy(bad_data)
        self.data_root, self.bad_data = data_root, bad_data
        self.classes, samples = self._index(data_root, split)
        self.scan_report = self._scan(data_root, samples, bad_data)
        bad = set(self.scan_report.bad_files)
        self.samples = [sample for sample in samples if sample[0] not in bad]
        if not self.samples:
            raise self._error(data_root, f'has no readable image ({self.scan_report.summary()})')
        self.targets = [label for _, label in self.samples]
        # Files that break after the scan, flagged by whichever process meets them: shared
        # memory, so loader workers and the main process (skipped_files) see the same flags.
        self._broken = torch.zeros(len(self.samples), dtype=torch.bool).share_memory_()

    @property
    def skipped_files(self) -> int:
        """Image files left out: bad at the scan, or broken since (``bad_data='skip'``)."""
        return self.scan_report.bad + int(self._broken.sum())

    @classmethod
    def check_images(cls, data_root: str, split: str = 'train',
                     bad_data: str = 'strict') -> ScanReport:
        """Decode every image file of ``split``; raise DataRootError for bad ones if strict."""
        _check_policy(bad_data)
        return cls._scan(data_root, cls._index(data_root, split)[1], bad_data, log=False)

    @classmethod
    def _scan(cls, data_root: str, samples: Samples, bad_data: str,
              log: bool = True) -> ScanReport:
        cache = Path(data_root) / SCAN_CACHE if Path(data_root).is_dir() else None
        report = scan_image_files([path for path, _ in samples], cache_file=cache and str(cache))
        if report.bad and bad_data == 'strict':
            raise DataRootError(f'{data_root}: {report.summary()}, e.g. '
                                f'{_examples(data_root, report.bad_files)}; fix or remove them, '
                                f'or {SKIP_HINT}')
        if report.bad and log:  # the dataset logs what it skips; check_images does not
            print_log(f'{data_root}: skipped {report.summary()} (bad_data=skip), e.g. '
                      f'{_examples(data_root, report.bad_files, 3)}', 'current', logging.WARNING)
        return report

    def _item(self, index: int) -> Dict[str, Any]:
        # A file that broke after the scan: under 'skip' the next index stands in for it (the
        # same one every epoch), so a loader worker never dies of one bad file.
        for step in range(len(self.samples)):
            i = (index + step) % len(self.samples)
            if self._broken[i]:
                continue
            try:
                image = _load_rgb(self.samples[i][0])
            except Exception:  # noqa: BLE001 - decoding errors come in many types
                self._broken_file(i)
                continue
            return dict(inputs=self.transform(image), data_samples=int(self.targets[i]))
        raise self._error(self.data_root, 'has no readable image left')

    def _broken_file(self, i: int) -> None:
        path = self.samples[i][0]
        category, reason = check_image(path) or ('unreadable', 'fails to load')
        problem = f'{path}: {LABELS[category]} image file ({reason})'
        if self.bad_data == 'strict':
            raise BadImageError(f'{problem}; fix or remove it, or {SKIP_HINT}') from None
        self._broken[i] = True
        print_log(f'{problem}: skipped, the next sample stands in; {self.skipped_files} image '
                  'files skipped in all', 'current', logging.WARNING)

    def _load(self, index: int) -> Image.Image:
        return _load_rgb(self.samples[index][0])


@DATASETS.register_module()
class TinyImageNet(_FolderDataset):
    """Tiny-ImageNet-200 in the layout of the official zip.

    ``wnids.txt``, ``train/<wnid>/images/*.JPEG``, ``val/images/*.JPEG`` and
    ``val/val_annotations.txt`` (filename, wnid, box, tab-separated). The class index is
    the position of the wnid in the sorted ``wnids.txt`` (the order ImageFolder gives
    ``train/``, as in the authors' code). The official test split has no labels, so
    ``'test'`` reads ``val/`` like ``'val'``. Hidden files are ignored.

    Args:
        data_root: The ``tiny-imagenet-200`` folder, or the folder that contains it.
        split: ``'train'``, ``'val'`` or ``'test'``.
        input_size: Output side of the view in pixels.
        view: A preset of ``benchmark.views`` or None for the PIL image.
        bad_data: ``'strict'``: a file that is not a decodable image raises DataRootError;
            ``'skip'``: such files are left out and counted in ``skipped_files``.
    """

    FOLDER = 'tiny-imagenet-200'
    EXPECTED = 'expected wnids.txt, train/<wnid>/images/, val/images/, val/val_annotations.txt'

    def __init__(self, data_root: str, split: str = 'train', input_size: int = 224,
                 view: Optional[Union[str, dict]] = 'mocov2', bad_data: str = 'strict') -> None:
        super().__init__(data_root, split, input_size, view, bad_data)

    @classmethod
    def check_root(cls, data_root: str, split: str = 'train') -> None:
        """Raise DataRootError unless ``data_root`` holds the ``split`` of Tiny-ImageNet."""
        cls._index(data_root, split)

    @classmethod
    def _error(cls, data_root: str, problem: str) -> DataRootError:
        hint = Path(data_root).parent if Path(data_root).name == cls.FOLDER else data_root
        return DataRootError(f'dataset root {data_root} {problem} ({cls.EXPECTED}); '
                             f'run: python tools/prepare_data.py tiny --root {hint}')

    @classmethod
    def _index(cls, data_root: str, split: str) -> Tuple[List[str], Samples]:
        root = Path(data_root)
        if not (root / 'wnids.txt').exists() and (root / cls.FOLDER / 'wnids.txt').is_file():
            root = root / cls.FOLDER
        if not root.is_dir():
            raise cls._error(data_root, 'not found')
        needed = ['wnids.txt', 'train'] if _split(split) == 'train' else [
            'wnids.txt', 'val/images', 'val/val_annotations.txt']
        missing = [name for name in needed if not (root / name).exists()]
        if missing:
            raise cls._error(data_root, f"is malformed: missing {', '.join(missing)}")
        wnids = sorted(line.strip() for line in (root / 'wnids.txt').read_text().splitlines()
                       if line.strip())
        index = {wnid: i for i, wnid in enumerate(wnids)}
        if _split(split) == 'train':
            samples = cls._train_samples(data_root, root / 'train', index)
        else:
            samples = cls._val_samples(data_root, root / 'val', index)
        return wnids, samples

    @classmethod
    def _train_samples(cls, data_root: str, train: Path, index: Dict[str, int]) -> Samples:
        samples = []
        for wnid, label in index.items():
            folder = train / wnid / 'images'
            if not folder.is_dir():
                raise cls._error(data_root, f'is malformed: missing train/{wnid}/images/')
            samples += [(str(folder / name), label) for name in sorted(os.listdir(folder))
                        if name.lower().endswith(IMG_EXTENSIONS) and not name.startswith('.')]
        if not samples:
            raise cls._error(data_root, 'is malformed: no images under train/')
        return samples

    @classmethod
    def _val_samples(cls, data_root: str, val: Path, index: Dict[str, int]) -> Samples:
        rows = [line.split('\t') for line in (val / 'val_annotations.txt').read_text().splitlines()
                if line.strip()]
        unknown = sorted({row[1] for row in rows if len(row) < 2 or row[1] not in index})
        if unknown or not rows:
            problem = (f"names wnids not in wnids.txt: {', '.join(unknown[:3])}" if unknown
                       else 'is empty')
            raise cls._error(data_root, f'is malformed: val/val_annotations.txt {problem}')
        present = set(os.listdir(val / 'images'))
        absent = [row[0] for row in rows if row[0] not in present]
        if absent:
            raise cls._error(data_root, f'is malformed: {len(absent)} images of '
                             f'val/val_annotations.txt missing from val/images/ (e.g. {absent[0]})')
        return [(str(val / 'images' / row[0]), index[row[1]]) for row in rows]


def _unpickle(path: Path) -> Dict[str, Any]:
    # The official batches were pickled by Python 2: 'latin1' turns their str keys into
    # str (as torchvision reads them); keys that are bytes (re-dumped files) are decoded.
    with open(path, 'rb') as f:
        entry = pickle.load(f, encoding='latin1')
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in entry.items()}


@DATASETS.register_module()
class CIFAR10(_ImageDataset):
    """CIFAR-10 from the official python pickle batches (``cifar-10-batches-py/``).

    Read directly rather than through torchvision, whose md5 checks reject generated test
    data. ``'val'`` and ``'test'`` both read ``test_batch``.

    Args:
        data_root: The folder that contains ``cifar-10-batches-py`` (torchvision's
            convention), or that folder itself.
        split: ``'train'``, ``'val'`` or ``'test'``.
        input_size: Output side of the view in pixels.
        view: A preset of ``benchmark.views`` or None for the PIL image.
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
            return _unpickle(path)
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
        files = cls.TRAIN_FILES if _split(split) == 'train' else cls.TEST_FILES
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
        view: A preset of ``benchmark.views`` or None for the PIL image.
    """

    FOLDER = 'cifar-100-python'
    TRAIN_FILES = ['train']
    TEST_FILES = ['test']
    META_FILE = 'meta'
    LABEL_KEY = 'fine_labels'
    NAMES_KEY = 'fine_label_names'
    KIND = 'cifar100'


@DATASETS.register_module()
class ImageFolderDataset(_FolderDataset):
    """Any ``<root>/<split>/<class>/<image>`` tree, or ``<root>/<class>/<image>``.

    Files are discovered as torchvision's ImageFolder does (sorted class folders, searched
    recursively, its image extensions, the same order), except that hidden files and
    folders (``.ipynb_checkpoints``, macOS ``._x.jpg``) are ignored and a folder without
    image files is not a class. ``'val'`` falls back to a ``test/`` folder and vice versa;
    the flat layout is used only when the root has no train/, val/ or test/ folder.

    Args:
        data_root: The tree's root folder (e.g. ImageNet's).
        split: ``'train'``, ``'val'`` or ``'test'``.
        input_size: Output side of the view in pixels.
        view: A preset of ``benchmark.views`` or None for the PIL image.
        bad_data: ``'strict'``: a file that is not a decodable image raises DataRootError;
            ``'skip'``: such files are left out and counted in ``skipped_files``.
    """

    def __init__(self, data_root: str, split: str = 'train', input_size: int = 224,
                 view: Optional[Union[str, dict]] = 'mocov2', bad_data: str = 'strict') -> None:
        super().__init__(data_root, split, input_size, view, bad_data)

    @classmethod
    def check_root(cls, data_root: str, split: str = 'train') -> None:
        """Raise DataRootError unless ``data_root`` holds class folders with images."""
        cls._index(data_root, split)

    @staticmethod
    def _error(data_root: str, problem: str) -> DataRootError:
        return DataRootError(
            f'dataset root {data_root} {problem} (expected <split>/<class>/<image> or '
            f'<class>/<image>); check with: '
            f'python tools/prepare_data.py check folder --root {data_root}')

    @classmethod
    def _index(cls, data_root: str, split: str) -> Tuple[List[str], Samples]:
        root = Path(data_root)
        if not root.is_dir():
            raise cls._error(data_root, 'not found')
        _split(split)
        names = ['train'] if split == 'train' else [split, 'test' if split == 'val' else 'val']
        folders = [root / name for name in names if (root / name).is_dir()]
        if folders:
            root = folders[0]
        elif any((root / name).is_dir() for name in ('train', 'val', 'test')):
            raise cls._error(data_root, f'is malformed: missing {split}/')
        found = {entry.name: _class_images(entry.path) for entry in os.scandir(root)
                 if entry.is_dir() and not entry.name.startswith('.')}
        classes = sorted(name for name, files in found.items() if files)
        if not classes:
            raise cls._error(data_root, f'is malformed: no class folder with images in {root}')
        return classes, [(path, label) for label, name in enumerate(classes)
                         for path in found[name]]


def _class_images(folder: str) -> List[str]:
    """Image files under ``folder`` in torchvision's order (sorted walk), hidden ones left out."""
    walked = []
    for parent, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = [name for name in dirs if not name.startswith('.')]
        walked.append((parent, files))
    return [os.path.join(parent, name) for parent, files in sorted(walked)
            for name in sorted(files)
            if not name.startswith('.') and name.lower().endswith(IMG_EXTENSIONS)]


@DATASETS.register_module()
class Digits(_ImageDataset):
    """scikit-learn's bundled digits: 1,797 8x8 grey images of 10 classes, as RGB.

    The data ships inside scikit-learn, so there are no files and nothing to download;
    ``data_root`` is accepted for a uniform config and ignored. The split is a fixed
    stratified 80/20 split (1,437 train / 360 val images, ``random_state=0``).

    Args:
        data_root: Ignored (embedded data).
        split: ``'train'``, ``'val'`` or ``'test'``.
        input_size: Output side of the view in pixels (the view upsamples the 8x8 images).
        view: A preset of ``benchmark.views`` or None for the PIL image.
    """

    def __init__(self, data_root: str = '', split: str = 'train', input_size: int = 224,
                 view: Optional[Union[str, dict]] = 'mocov2') -> None:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        super().__init__(input_size, view)
        digits = load_digits()
        train, val = train_test_split(np.arange(len(digits.target)), test_size=0.2,
                                      random_state=0, stratify=digits.target)
        keep = train if _split(split) == 'train' else val
        # Pixel values are counts 0-16; scale to the 0-255 range the views expect.
        self.images = np.round(digits.images[keep] * (255 / 16)).astype(np.uint8)
        self.targets = digits.target[keep].tolist()
        self.classes = [str(name) for name in digits.target_names]

    @classmethod
    def check_root(cls, data_root: str = '', split: str = 'train') -> None:
        """Nothing to check: the data is embedded in scikit-learn."""
        _split(split)

    def _load(self, index: int) -> Image.Image:
        return Image.fromarray(self.images[index]).convert('RGB')
