"""Small fake datasets in exactly the official on-disk formats, for tests and demos.

Images are noise around a colour that depends on the class, so a model can learn
something from them. Everything is derived from ``seed``.
"""
from __future__ import annotations

import colorsys
import os
import pickle
import struct
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
from PIL import Image

CIFAR10_CLASSES = ['airplane', 'automobile', 'bird', 'cat', 'deer',
                   'dog', 'frog', 'horse', 'ship', 'truck']


def _class_image(rng: np.random.Generator, label: int, num_classes: int, size: int) -> np.ndarray:
    """An (size, size, 3) uint8 image: class colour + noise + a random brighter square."""
    colour = np.array(colorsys.hsv_to_rgb(label / num_classes, 0.8, 0.7)) * 255
    image = colour + rng.normal(0, 20, (size, size, 3))
    side = max(1, size // 3)
    y, x = rng.integers(0, size - side + 1, 2)
    image[y:y + side, x:x + side] += 60
    return np.clip(image, 0, 255).astype(np.uint8)


def make_fake_tiny_imagenet(root: str | Path, num_classes: int = 4, train_per_class: int = 8,
                            val_per_class: int = 2, size: int = 64, seed: int = 0) -> str:
    """Write a fake Tiny-ImageNet-200 as the official zip extracts it.

    ``wnids.txt`` (unsorted, like the official one), ``words.txt``,
    ``train/<wnid>/images/<wnid>_<i>.JPEG`` + ``<wnid>_boxes.txt``, ``val/images/val_<k>.JPEG``
    + ``val/val_annotations.txt`` (classes interleaved) and unlabelled ``test/images/``.

    Args:
        root: Folder in which ``tiny-imagenet-200/`` is created.
        num_classes: Number of wnids, named ``n00000000``, ``n00000001``, ...
        train_per_class: Training images per class.
        val_per_class: Validation images per class.
        size: Image side in pixels (64 in the real dataset).
        seed: Seed of all randomness.

    Returns:
        The dataset root, ``<root>/tiny-imagenet-200``.
    """
    rng = np.random.default_rng(seed)
    base = Path(root) / 'tiny-imagenet-200'
    wnids = [f'n{i:08d}' for i in range(num_classes)]
    # The official wnids.txt is not sorted; class indices come from the sorted list.
    order = rng.permutation(num_classes)
    if num_classes > 1 and (np.diff(order) > 0).all():
        order = order[::-1]
    base.mkdir(parents=True, exist_ok=True)
    (base / 'wnids.txt').write_text(''.join(f'{wnids[i]}\n' for i in order))
    (base / 'words.txt').write_text(''.join(f'{w}\tfake class {i}\n' for i, w in enumerate(wnids)))
    box = f'0\t0\t{size - 1}\t{size - 1}'
    for label, wnid in enumerate(wnids):
        folder = base / 'train' / wnid / 'images'
        folder.mkdir(parents=True)
        names = [f'{wnid}_{i}.JPEG' for i in range(train_per_class)]
        for name in names:
            Image.fromarray(_class_image(rng, label, num_classes, size)).save(folder / name, 'JPEG')
        (folder.parent / f'{wnid}_boxes.txt').write_text(''.join(f'{n}\t{box}\n' for n in names))
    for split in ('val', 'test'):
        (base / split / 'images').mkdir(parents=True)
    val_labels = rng.permutation(np.repeat(np.arange(num_classes), val_per_class))
    rows = []
    for k, label in enumerate(val_labels):
        image = Image.fromarray(_class_image(rng, int(label), num_classes, size))
        image.save(base / 'val' / 'images' / f'val_{k}.JPEG', 'JPEG')
        image.save(base / 'test' / 'images' / f'test_{k}.JPEG', 'JPEG')
        rows.append(f'val_{k}.JPEG\t{wnids[label]}\t{box}\n')
    (base / 'val' / 'val_annotations.txt').write_text(''.join(rows))
    return str(base)


class _Py2Pickler(pickle._Pickler):
    """Pickles ``bytes`` as Python 2 ``str``, as in the official CIFAR files.

    Those were written by Python 2: ``pickle.load(f, encoding='latin1')`` (torchvision)
    gives str keys and ``encoding='bytes'`` (the CIFAR web page's recipe) gives bytes
    keys. Python 3 bytes would load as bytes under both, which torchvision cannot read.
    """

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_str(self, obj: bytes) -> None:
        if len(obj) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack('<i', len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def _dump_py2(obj: Any, path: Path) -> None:
    with open(path, 'wb') as f:
        _Py2Pickler(f, protocol=2).dump(obj)


def _cifar_split(rng: np.random.Generator, num_classes: int, per_class: int) -> tuple:
    labels = rng.permutation(np.repeat(np.arange(num_classes), per_class))
    # Rows are CHW-flattened, as in the official batches.
    data = np.stack([_class_image(rng, int(c), num_classes, 32).transpose(2, 0, 1).reshape(-1)
                     for c in labels]) if len(labels) else np.zeros((0, 3072), np.uint8)
    names = [f'fake_{i:06d}.png'.encode() for i in range(len(labels))]
    return data, [int(c) for c in labels], names


def make_fake_cifar(root: str | Path, which: str = 'cifar10', train_per_class: int = 5,
                    test_per_class: int = 2, seed: int = 0) -> str:
    """Write fake CIFAR-10 or CIFAR-100 python pickle batches with the official keys.

    CIFAR-10: ``cifar-10-batches-py/data_batch_1..5`` (training images split over five
    batches), ``test_batch``, ``batches.meta``. CIFAR-100: ``cifar-100-python/train``,
    ``test``, ``meta`` with fine and coarse labels (coarse = fine // 5, fake names).

    Args:
        root: Folder in which the batches folder is created.
        which: ``'cifar10'`` or ``'cifar100'``.
        train_per_class: Training images per class.
        test_per_class: Test images per class.
        seed: Seed of all randomness.

    Returns:
        ``root`` (the data_root convention of torchvision and ``benchmark.data``).
    """
    if which not in ('cifar10', 'cifar100'):
        raise ValueError(f"unknown CIFAR {which!r}; valid: cifar10, cifar100")
    rng = np.random.default_rng(seed)
    num_classes = 10 if which == 'cifar10' else 100
    train, test = (_cifar_split(rng, num_classes, n) for n in (train_per_class, test_per_class))
    if which == 'cifar10':
        folder = Path(root) / 'cifar-10-batches-py'
        folder.mkdir(parents=True, exist_ok=True)
        batches = [(f'data_batch_{i + 1}', f'training batch {i + 1} of 5', slice(i, None, 5))
                   for i in range(5)]
        for name, batch_label, rows in batches:
            data, labels, names = train
            _dump_py2({b'batch_label': batch_label.encode(), b'labels': labels[rows],
                       b'data': data[rows], b'filenames': names[rows]}, folder / name)
        data, labels, names = test
        _dump_py2({b'batch_label': b'testing batch 1 of 1', b'labels': labels,
                   b'data': data, b'filenames': names}, folder / 'test_batch')
        _dump_py2({b'num_cases_per_batch': len(train[1]) // 5 or 1, b'num_vis': 3072,
                   b'label_names': [n.encode() for n in CIFAR10_CLASSES]}, folder / 'batches.meta')
        return str(root)
    folder = Path(root) / 'cifar-100-python'
    folder.mkdir(parents=True, exist_ok=True)
    for name, (data, labels, names) in (('train', train), ('test', test)):
        _dump_py2({b'filenames': names, b'batch_label': f'{name}ing batch 1 of 1'.encode(),
                   b'fine_labels': labels, b'coarse_labels': [c // 5 for c in labels],
                   b'data': data}, folder / name)
    _dump_py2({b'fine_label_names': [f'fine_{i:02d}'.encode() for i in range(100)],
               b'coarse_label_names': [f'coarse_{i:02d}'.encode() for i in range(20)]},
              folder / 'meta')
    return str(root)


def make_fake_image_folder(root: str | Path, classes: Sequence[str] = ('cat', 'dog', 'fish'),
                           splits: Sequence[str] = ('train', 'val'), per_class: int = 3,
                           size: int = 32, ext: str = '.png', seed: int = 0) -> str:
    """Write a fake ImageFolder tree ``<root>/<split>/<class>/<i><ext>``.

    Args:
        root: Root folder of the tree.
        classes: Class folder names.
        splits: Split folder names; empty for the flat ``<root>/<class>/`` layout.
        per_class: Images per class and split.
        size: Image side in pixels.
        ext: Image file extension (decides the format PIL writes).
        seed: Seed of all randomness.

    Returns:
        ``root``.
    """
    rng = np.random.default_rng(seed)
    for split in splits or ['']:
        for label, name in enumerate(classes):
            folder = Path(root) / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                image = _class_image(rng, label, len(classes), size)
                Image.fromarray(image).save(folder / f'{i}{ext}')
    return str(root)


def write_odd_format_images(folder: str | Path, size: int = 16, seed: int = 0) -> List[str]:
    """Write valid images in the modes real data sets hold besides 8-bit RGB.

    Grey JPEG, CMYK JPEG, RGB PNG, RGBA PNG (the RGB image with a random alpha), palette PNG
    with a transparent colour and a 16-bit grey PNG (values over the whole 0-65535 range),
    named ``odd_<mode>.<ext>``.

    Args:
        folder: Folder to write into (created if needed).
        size: Image side in pixels.
        seed: Seed of all randomness.

    Returns:
        The paths written, sorted.
    """
    rng = np.random.default_rng(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rgb = Image.fromarray(_class_image(rng, 0, 1, size))
    palette = rgb.convert('P', palette=Image.Palette.ADAPTIVE, colors=16)
    wide = rng.integers(0, 65536, (size, size), dtype=np.uint16)
    wide[0, :2] = (0, 65535)
    rgba = rgb.convert('RGBA')
    rgba.putalpha(Image.fromarray(rng.integers(0, 256, (size, size), dtype=np.uint8)))
    images = {'odd_L.jpg': (rgb.convert('L'), 'JPEG'),
              'odd_CMYK.jpeg': (rgb.convert('CMYK'), 'JPEG'),
              'odd_RGB.png': (rgb, 'PNG'), 'odd_RGBA.png': (rgba, 'PNG'),
              'odd_P.png': (palette, 'PNG'), 'odd_I16.png': (Image.fromarray(wide), 'PNG')}
    for name, (image, fmt) in images.items():
        extra = dict(transparency=0) if image.mode == 'P' else {}
        image.save(folder / name, fmt, **extra)
    return sorted(str(folder / name) for name in images)


def image_files_under(root: Path) -> List[str]:
    """Image files under ``root`` (not hidden, torchvision's extensions), sorted."""
    from torchvision.datasets.folder import IMG_EXTENSIONS

    found = []
    for parent, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith('.')]
        found += [os.path.join(parent, f) for f in files
                  if not f.startswith('.') and f.lower().endswith(IMG_EXTENSIONS)]
    return sorted(found)


def truncate_image_file(path: str | Path) -> None:
    """Cut a JPEG or PNG in the middle of its compressed pixels, as an interrupted copy does.

    Cutting inside the headers would make PIL fail to identify the file instead, and cutting
    only the trailer (EOI, IEND) leaves every pixel decodable.
    """
    data = Path(path).read_bytes()
    start = data.find(b'IDAT' if data.startswith(b'\x89PNG') else b'\xff\xda')  # PNG / JPEG
    start = start + 16 if start >= 0 else 0
    Path(path).write_bytes(data[:start + (len(data) - start) // 2])


def corrupt_image_folder(root: str | Path, truncated: float = 0.05, non_image: float = 0.01,
                         zero_byte: float = 0.01, seed: int = 0) -> Dict[str, List[str]]:
    """Break a random share of the image files under ``root`` in place, like real data does.

    ``truncated``: cut in the middle of the pixel data; ``non_image``: replaced by an HTML
    error page (a failed download saved under the image's name); ``zero_byte``: emptied.
    A share above 0 breaks at least one file; the three sets are disjoint.

    Args:
        root: Folder searched recursively (hidden entries skipped, torchvision's extensions).
        truncated: Share of the files to truncate.
        non_image: Share of the files to replace by text.
        zero_byte: Share of the files to empty.
        seed: Seed of the choice.

    Returns:
        ``{'truncated': [...], 'non_image': [...], 'zero_byte': [...]}``, sorted paths.
    """
    files = image_files_under(Path(root))
    shares = dict(truncated=truncated, non_image=non_image, zero_byte=zero_byte)
    counts = {k: max(1, round(v * len(files))) if v > 0 else 0 for k, v in shares.items()}
    if sum(counts.values()) > len(files):
        raise ValueError(f'cannot break {sum(counts.values())} of {len(files)} files')
    order = np.random.default_rng(seed).permutation(len(files))
    chosen, start = {}, 0
    for kind, count in counts.items():
        chosen[kind] = sorted(files[i] for i in order[start:start + count])
        start += count
    for path in chosen['truncated']:
        truncate_image_file(path)
    for path in chosen['non_image']:
        Path(path).write_bytes(b'<html><body><h1>404 Not Found</h1></body></html>\n')
    for path in chosen['zero_byte']:
        Path(path).write_bytes(b'')
    return chosen
