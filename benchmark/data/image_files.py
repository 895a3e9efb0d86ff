"""Datasets of image files on disk: Tiny-ImageNet (the official zip's layout) and ImageFolder.

The folder datasets decode every image file once (``benchmark.data.scan``, cached in the data
root) and apply ``bad_data``: ``'strict'`` raises ``DataRootError`` naming the bad files,
``'skip'`` drops them and counts them in ``skipped_files``. ``check_images`` runs the same check
without building the dataset.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from mmengine.logging import print_log
from mmengine.registry import DATASETS
from PIL import Image
from torchvision.datasets.folder import IMG_EXTENSIONS

from benchmark.data.base import (SKIP_HINT, BadImageError,
                                 DataRootError, Samples, check_bad_data_policy, examples_of, ImageDataset,
                                 load_rgb, split_name)
from benchmark.layout import SCAN_CACHE
from benchmark.data.scan import LABELS, TO_RGB_RULE, ScanReport, check_image, scan_image_files

class _FolderDataset(ImageDataset):
    """Image files on disk: every file is checked once before use, per ``bad_data``."""

    grey_to_rgb = TO_RGB_RULE  # load_rgb reads every file as RGB

    def __init__(self, data_root: str, split: str = 'train', input_size: int = 224,
                 view: Optional[Union[str, dict]] = 'mocov2', bad_data: str = 'strict') -> None:
        super().__init__(input_size, view)
        check_bad_data_policy(bad_data)
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

    @classmethod
    def check_root(cls, data_root: str, split: str = 'train') -> None:
        """Raise DataRootError unless ``data_root`` holds the ``split`` in this dataset's layout."""
        cls._index(data_root, split)

    @property
    def skipped_files(self) -> int:
        """Image files left out: bad at the scan, or broken since (``bad_data='skip'``)."""
        return self.scan_report.bad + int(self._broken.sum())

    @classmethod
    def check_images(cls, data_root: str, split: str = 'train',
                     bad_data: str = 'strict') -> ScanReport:
        """Decode every image file of ``split``; raise DataRootError for bad ones if strict."""
        check_bad_data_policy(bad_data)
        return cls._scan(data_root, cls._index(data_root, split)[1], bad_data, log=False)

    @classmethod
    def _scan(cls, data_root: str, samples: Samples, bad_data: str,
              log: bool = True) -> ScanReport:
        cache = Path(data_root) / SCAN_CACHE if Path(data_root).is_dir() else None
        report = scan_image_files([path for path, _ in samples], cache_file=cache and str(cache))
        if report.bad and bad_data == 'strict':
            raise DataRootError(f'{data_root}: {report.summary()}, e.g. '
                                f'{examples_of(data_root, report.bad_files)}; fix or remove them, '
                                f'or {SKIP_HINT}')
        if report.bad and log:  # the dataset logs what it skips; check_images does not
            print_log(f'{data_root}: skipped {report.summary()} (bad_data=skip), e.g. '
                      f'{examples_of(data_root, report.bad_files, 3)}', 'current', logging.WARNING)
        return report

    def _item(self, index: int) -> Dict[str, Any]:
        # A file that broke after the scan: under 'skip' the next index stands in for it (the
        # same one every epoch), so a loader worker never dies of one bad file.
        for step in range(len(self.samples)):
            i = (index + step) % len(self.samples)
            if self._broken[i]:
                continue
            try:
                image = load_rgb(self.samples[i][0])
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
        return load_rgb(self.samples[index][0])


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
        view: A preset of ``benchmark.data.views`` or None for the PIL image.
        bad_data: ``'strict'``: a file that is not a decodable image raises DataRootError;
            ``'skip'``: such files are left out and counted in ``skipped_files``.
    """

    FOLDER = 'tiny-imagenet-200'
    EXPECTED = 'expected wnids.txt, train/<wnid>/images/, val/images/, val/val_annotations.txt'

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
        needed = ['wnids.txt', 'train'] if split_name(split) == 'train' else [
            'wnids.txt', 'val/images', 'val/val_annotations.txt']
        missing = [name for name in needed if not (root / name).exists()]
        if missing:
            raise cls._error(data_root, f"is malformed: missing {', '.join(missing)}")
        wnids = sorted(line.strip() for line in (root / 'wnids.txt').read_text().splitlines()
                       if line.strip())
        index = {wnid: i for i, wnid in enumerate(wnids)}
        if split_name(split) == 'train':
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
        view: A preset of ``benchmark.data.views`` or None for the PIL image.
        bad_data: ``'strict'``: a file that is not a decodable image raises DataRootError;
            ``'skip'``: such files are left out and counted in ``skipped_files``.
    """

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
        split_name(split)
        names = ['train'] if split == 'train' else [split, 'test' if split == 'val' else 'val']
        folders = [root / name for name in names if (root / name).is_dir()]
        if folders:
            root = folders[0]
        elif any((root / name).is_dir() for name in ('train', 'val', 'test')):
            raise cls._error(data_root, f'is malformed: missing {split}/')
        found = {entry.name: class_images(entry.path) for entry in os.scandir(root)
                 if entry.is_dir() and not entry.name.startswith('.')}
        classes = sorted(name for name, files in found.items() if files)
        if not classes:
            raise cls._error(data_root, f'is malformed: no class folder with images in {root}')
        return classes, [(path, label) for label, name in enumerate(classes)
                         for path in found[name]]


def class_images(folder: str) -> List[str]:
    """Image files under ``folder`` in torchvision's order (sorted walk), hidden ones left out."""
    walked = []
    for parent, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = [name for name in dirs if not name.startswith('.')]
        walked.append((parent, files))
    return [os.path.join(parent, name) for parent, files in sorted(walked)
            for name in sorted(files)
            if not name.startswith('.') and name.lower().endswith(IMG_EXTENSIONS)]


@DATASETS.register_module()
class ImageNet(ImageFolderDataset):
    """ImageNet (ILSVRC-2012) as an ImageFolder tree: ``<root>/{train,val}/<wnid>/*.JPEG``.

    The same reader as `ImageFolderDataset`; its own name so records and the paper's Table 5
    rows say 'imagenet'.
    """
