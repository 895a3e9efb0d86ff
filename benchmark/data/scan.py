"""Pre-flight check of image files: open and fully decode each one before training starts.

A file is bad when it is empty (``zero_byte``), is not an image PIL can identify
(``non_image``), ends early (``truncated``: PIL's "image file is truncated" / "Truncated File
Read"), or cannot be read or decoded for another reason (``unreadable``: corrupt data, no
permission, a decompression-bomb size, a mode with no RGB conversion). Grey, RGBA, palette,
CMYK and 16-bit images are good; ``to_rgb`` is the conversion the datasets apply.

``ImageFile.LOAD_TRUNCATED_IMAGES`` is never set here: with it PIL pads a truncated image with
grey and the file would pass. Results are cached per (path, size, mtime) in the process and,
when ``cache_file`` is given, in a JSON file, so repeated scans of 100k files cost a stat each.
"""
from __future__ import annotations

import json
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
from PIL import Image, ImageFile, UnidentifiedImageError
from tqdm import tqdm

from benchmark import dist
from benchmark.atomic_io import atomic_write_text

CATEGORIES = ('zero_byte', 'non_image', 'truncated', 'unreadable')
LABELS = dict(zero_byte='zero-byte', non_image='non-image', truncated='truncated',
              unreadable='unreadable')
Result = Optional[Tuple[str, str]]  # None for a good file, else (category, reason)
_MEMO: Dict[Tuple[str, int, int], Result] = {}  # (abspath, size, mtime_ns) -> result
_CACHE_VERSION = 1


@dataclass
class ScanReport:
    """What ``scan_image_files`` found: the number of files and the bad ones by category."""

    total: int = 0
    zero_byte: List[str] = field(default_factory=list)
    non_image: List[str] = field(default_factory=list)
    truncated: List[str] = field(default_factory=list)
    unreadable: List[str] = field(default_factory=list)
    reasons: Dict[str, str] = field(default_factory=dict)  # bad path -> PIL's error, one line

    @property
    def bad(self) -> int:
        return sum(len(getattr(self, name)) for name in CATEGORIES)

    @property
    def ok(self) -> int:
        return self.total - self.bad

    @property
    def bad_files(self) -> List[str]:
        return sorted(path for name in CATEGORIES for path in getattr(self, name))

    def counts(self) -> Dict[str, int]:
        """Bad files per category, the largest first (categories with none left out)."""
        counts = {name: len(getattr(self, name)) for name in CATEGORIES}
        return {k: v for k, v in sorted(counts.items(), key=lambda kv: -kv[1]) if v}

    def summary(self) -> str:
        """E.g. ``'3 bad image files (2 truncated, 1 zero-byte)'``."""
        parts = ', '.join(f'{n} {LABELS[name]}' for name, n in self.counts().items())
        return f"{self.bad} bad image file{'s' if self.bad != 1 else ''}" + (
            f' ({parts})' if parts else '')


# `to_rgb` in words, for the sidecar of an encoder evaluated on image files.
TO_RGB_RULE = ("each file as RGB, as PIL's image.convert('RGB') makes it: grey in all three "
               'channels (16-bit grey scaled by 255/65535 first), alpha dropped')


def to_rgb(image: Image.Image) -> Image.Image:
    """An 8-bit RGB copy of ``image``.

    16-bit grey (``I;16*``) is scaled by 255/65535 (PIL's own conversion clips at 255, so
    nearly every pixel would be white). Alpha is dropped, as torchvision's loader does.
    """
    if image.mode.startswith('I;16'):
        pixels = np.asarray(image, dtype=np.float64)
        return Image.fromarray(np.round(pixels * (255 / 65535)).astype(np.uint8)).convert('RGB')
    if image.mode == 'P' and 'transparency' in image.info:
        image = image.convert('RGBA')  # what PIL asks for; the colours are the same
    return image.convert('RGB')


def classify(err: BaseException) -> str:
    """The category of the error raised by opening or decoding a file."""
    if isinstance(err, UnidentifiedImageError):
        return 'non_image'
    # PIL's own OSErrors have no errno; system ones (whose message holds the path) do.
    if isinstance(err, OSError) and err.errno is None and 'truncated' in str(err).lower():
        return 'truncated'
    return 'unreadable'


def one_line(err: BaseException) -> str:
    return ' '.join(f'{type(err).__name__}: {err}'.split())


def check_image(path: str) -> Result:
    """Open, fully decode and convert one file: None if it is good, else (category, reason)."""
    try:
        if os.path.getsize(path) == 0:
            return 'zero_byte', 'empty file'
        with Image.open(path) as image:
            image.load()
            to_rgb(image)
    except Exception as err:  # noqa: BLE001 - bad files raise OSError, SyntaxError, ValueError...
        return classify(err), one_line(err)
    return None


def _stamp(path: str) -> Optional[Tuple[int, int]]:
    try:
        stat = os.stat(path)
    except OSError:
        return None  # check_image reports why
    return stat.st_size, stat.st_mtime_ns


def _cached(entry: object, stamp: Tuple[int, int]) -> Tuple[bool, Result]:
    """(found, result) of a cache-file entry ``[size, mtime_ns, category, reason]``."""
    if (isinstance(entry, list) and len(entry) == 4 and entry[:2] == list(stamp)
            and (entry[2] is None or entry[2] in CATEGORIES)):
        return True, None if entry[2] is None else (entry[2], str(entry[3]))
    return False, None


def _read_cache(cache_file: Optional[str]) -> dict:
    try:
        with open(cache_file, encoding='utf-8') as f:  # type: ignore[arg-type]
            data = json.load(f)
        return data['files'] if data.get('version') == _CACHE_VERSION else {}
    except (TypeError, OSError, ValueError, KeyError, AttributeError):
        return {}  # no cache, unreadable or another version: scan


def _write_cache(cache_file: str, files: dict) -> None:
    """Replace ``cache_file`` atomically; a read-only data folder just goes without a cache."""
    try:
        atomic_write_text(cache_file, json.dumps(dict(version=_CACHE_VERSION, files=files)))
    except OSError:
        pass


def _show_progress(count: int) -> bool:
    return count >= 2000 and dist.is_main()


def scan_image_files(paths: Iterable[Union[str, os.PathLike]], cache_file: Optional[str] = None,
                     workers: Optional[int] = None,
                     progress: Optional[bool] = None) -> ScanReport:
    """Check that every file is an image PIL can fully decode.

    Args:
        paths: The files.
        cache_file: A JSON file of earlier results, keyed by (path, size, mtime); read if it
            exists and rewritten with this scan's results. None: the in-process cache only.
        workers: Threads that decode (PIL releases the GIL while decoding); default: the CPUs.
        progress: Show a progress bar; default: for 2,000 files or more, on rank 0.

    Returns:
        The report; its path lists are sorted.
    """
    paths = [os.fspath(p) for p in paths]
    if ImageFile.LOAD_TRUNCATED_IMAGES:
        warnings.warn('PIL.ImageFile.LOAD_TRUNCATED_IMAGES is True (set by other code): '
                      'truncated images pass the scan', stacklevel=2)
    stamps = {p: _stamp(p) for p in paths}
    disk = _read_cache(cache_file) if cache_file else {}
    results: Dict[str, Result] = {}
    stale = []  # files whose entry in the cache file is missing or out of date
    for path in paths:
        if stamps[path] is None:
            continue  # cannot stat it: check_image says why
        name = os.path.abspath(path)
        found, cached = _cached(disk.get(name), stamps[path])
        if (name, *stamps[path]) in _MEMO:
            results[path] = _MEMO[(name, *stamps[path])]
        elif found:
            results[path] = cached
        if cache_file and not found:
            stale.append(path)
    todo = [p for p in paths if p not in results]
    workers = workers or min(8, os.cpu_count() or 1)
    show = _show_progress(len(todo)) if progress is None else progress
    with ThreadPoolExecutor(max(1, workers)) as pool, \
            tqdm(total=len(todo), desc='checking images', unit='file', disable=not show) as bar:
        for path, result in zip(todo, pool.map(check_image, todo)):
            results[path] = result
            bar.update()
    for path in todo:  # stamped before the check: a file changed meanwhile is checked again
        if stamps[path]:
            _MEMO[(os.path.abspath(path), *stamps[path])] = results[path]
    if stale:
        for path in stale:
            disk[os.path.abspath(path)] = [*stamps[path], *(results[path] or (None, None))]
        _write_cache(cache_file, disk)
    return _report(paths, results)


def _report(paths: List[str], results: Dict[str, Result]) -> ScanReport:
    report = ScanReport(total=len(paths))
    for path in sorted(p for p in paths if results[p]):
        category, reason = results[path]  # type: ignore[misc]
        getattr(report, category).append(path)
        report.reasons[path] = reason
    return report
