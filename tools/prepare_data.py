"""Download the benchmark's datasets in their official layouts, or verify a folder.

Examples:
    python tools/prepare_data.py tiny --root data           # -> data/tiny-imagenet-200
    python tools/prepare_data.py cifar10 --root data        # -> data/cifar-10-batches-py
    python tools/prepare_data.py tiny --root data --no-download   # verify only
    python tools/prepare_data.py check folder --root data/imagenet

Errors are one line ``error: ...`` on stderr with exit code 2 (``--debug`` for tracebacks).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import benchmark.data
from benchmark.data import DataRootError, ImageFolderDataset, TinyImageNet
from benchmark.cli import ArgumentParser, output_dir, run_tool
from benchmark.names import DATA_NAMES

TINY_URL = 'http://cs231n.stanford.edu/tiny-imagenet-200.zip'
TINY_MD5 = '90528d7ca1a48142e341f4ef8d21d0de'
# What `check` verifies: every dataset of benchmark/names.py DATASETS by its record name, and
# the short spellings of the downloads and of any image folder ('tiny', 'folder').
DATASETS = {**{name: getattr(benchmark.data, kind) for kind, name in DATA_NAMES.items()},
            'tiny': TinyImageNet, 'folder': ImageFolderDataset}


def verify(kind: str, data_root: str) -> None:
    """Check both splits of a dataset folder and print class and image counts.

    Args:
        kind: A key of ``DATASETS``.
        data_root: The dataset's ``data_root`` (as a config would give it).

    Raises:
        DataRootError: If a split is missing or malformed.
    """
    cls = DATASETS[kind]
    for split in ('train', 'val'):
        cls.check_root(data_root, split)  # the layout first, with its one-line error
        dataset = cls(data_root, split=split, view=None)  # image folders: every file decoded
        print(f'{kind} {split}: {len(dataset.classes)} classes, {len(dataset)} images '
              f'({data_root})')


def download_tiny(root: Path) -> str:
    """Download and extract the official Tiny-ImageNet-200 zip into ``root``."""
    from torchvision.datasets.utils import download_and_extract_archive

    data_root = root / 'tiny-imagenet-200'
    try:
        TinyImageNet.check_root(str(data_root), 'train')
        TinyImageNet.check_root(str(data_root), 'val')
        print(f'{data_root} already present; not downloading')
    except DataRootError:
        download_and_extract_archive(TINY_URL, download_root=str(root), md5=TINY_MD5,
                                     remove_finished=True)
    return str(data_root)


def download_cifar(kind: str, root: Path) -> str:
    """Download the official CIFAR python batches into ``root`` (md5-checked by torchvision)."""
    import torchvision

    tv_cls = torchvision.datasets.CIFAR10 if kind == 'cifar10' else torchvision.datasets.CIFAR100
    tv_cls(str(root), train=True, download=True)  # downloads once, skips if checksums match
    return str(root)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    common = ArgumentParser(add_help=False)
    common.add_argument('--debug', action='store_true', help='show tracebacks')
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command', required=True)
    for kind in ('tiny', 'cifar10', 'cifar100'):
        p = sub.add_parser(kind, parents=[common], help=f'download {kind} into ROOT, verify it')
        p.add_argument('--root', default='data', type=output_dir,
                       help='folder to download into (default: data)')
        p.add_argument('--no-download', action='store_true', help='only verify ROOT')
    p = sub.add_parser('check', parents=[common], help='verify an existing dataset folder')
    p.add_argument('kind', choices=sorted(DATASETS))
    p.add_argument('--root', required=True, help="the dataset's data_root")
    p.add_argument('--no-download', action='store_true', help='accepted; check never downloads')
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == 'check':
        verify(args.kind, args.root)
        return 0
    root = Path(args.root)
    if args.no_download:
        data_root = str(root / 'tiny-imagenet-200') if args.command == 'tiny' else str(root)
    else:
        try:
            data_root = (download_tiny(root) if args.command == 'tiny'
                         else download_cifar(args.command, root))
        except (RuntimeError, OSError) as err:  # network, disk, or a checksum mismatch
            raise ValueError(f'{args.command} download into {root} failed ({err}); check the '
                             'network, or put the files there and pass --no-download') from None
    verify(args.command, data_root)
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
