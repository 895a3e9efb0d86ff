"""Bad data: the pre-flight image check, bad_data='strict'|'skip', files that break later."""
import json
import logging
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MMLogger
from PIL import Image, ImageFile
from torch.utils.data import DataLoader

from benchmark.data import (
    BadImageError,
    DataRootError,
    ImageFolderDataset,
    TinyImageNet,
)
from benchmark.data import scan as data_scan
from benchmark.data.fakes import (
    corrupt_image_folder,
    make_fake_image_folder,
    make_fake_tiny_imagenet,
    truncate_image_file,
    write_odd_format_images,
)
from benchmark.data.scan import scan_image_files
from benchmark.engine.launch import check_data
from benchmark.evaluation.evaluate import describe_run, record_evaluation
from benchmark.layout import REPO_ROOT

ROOT = REPO_ROOT
KINDS = ('truncated', 'non_image', 'zero_byte')


@pytest.fixture(scope='module')
def clean_tiny(tmp_path_factory) -> str:
    """4 classes x (20 JPEGs + 6 odd-format images: grey, CMYK, RGB, RGBA, palette, 16-bit)."""
    root = make_fake_tiny_imagenet(tmp_path_factory.mktemp('clean'), num_classes=4,
                                   train_per_class=20, val_per_class=2, size=16)
    for label, folder in enumerate(sorted(Path(root, 'train').iterdir())):
        write_odd_format_images(folder / 'images', size=16, seed=label)
    return root


@pytest.fixture
def tiny(clean_tiny, tmp_path) -> str:
    """A fresh copy of the clean fake, to break."""
    return str(shutil.copytree(clean_tiny, tmp_path / 'tiny-imagenet-200'))


@pytest.fixture
def broken(tiny):
    """(root, {kind: paths}): 10% truncated, 3% non-image, 3% zero-byte training files."""
    chosen = corrupt_image_folder(Path(tiny, 'train'), truncated=0.1, non_image=0.03,
                                  zero_byte=0.03, seed=8)
    return tiny, chosen


def _train_files(root: str) -> list:
    return sorted(str(p) for p in Path(root, 'train').glob('*/images/*') if p.suffix != '.txt')


def _log_lines():
    """A fresh current MMLogger and the list its warnings are appended to."""
    logger = MMLogger.get_instance(f'test-data-scan-{uuid.uuid4().hex}')
    lines = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: lines.append(record.getMessage())
    logger.addHandler(handler)
    return lines


def test_truncated_images_are_never_allowed(broken):
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False
    scan_image_files(_train_files(broken[0]))
    TinyImageNet(broken[0], bad_data='skip', view=None)[0]
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False


def test_scan_counts_are_exact_with_no_false_positive(broken):
    root, chosen = broken
    files = _train_files(root)
    assert len(files) == 4 * 26 and [len(chosen[k]) for k in KINDS] == [10, 3, 3]
    odd = {Path(p).suffix for p in chosen['truncated'] if '/odd_' in p}
    assert odd == {'.png', '.jpeg', '.jpg'}  # truncated odd-format PNGs and JPEGs too
    report = scan_image_files(files, progress=False)
    assert (report.truncated, report.non_image, report.zero_byte) == tuple(chosen[k] for k in KINDS)
    assert report.unreadable == [] and report.bad == 16 and report.ok == 104 - 16
    assert report.summary() == '16 bad image files (10 truncated, 3 zero-byte, 3 non-image)'
    assert set(report.reasons) == set(report.bad_files)


def test_corrupt_but_complete_file_is_unreadable(tmp_path):
    path = tmp_path / 'x.png'
    Image.fromarray(np.full((8, 8, 3), 100, np.uint8)).save(path)
    data = bytearray(path.read_bytes())
    start = data.find(b'IDAT') + 8
    data[start:start + 20] = bytes(20)  # the zlib stream is garbage, the length is right
    path.write_bytes(bytes(data))
    report = scan_image_files([path, tmp_path / 'missing.png'])
    assert report.unreadable == sorted([str(path), str(tmp_path / 'missing.png')])
    assert report.truncated == report.non_image == report.zero_byte == []


def test_strict_raises_one_line_error_with_the_counts(broken):
    root, chosen = broken
    for build in (lambda: TinyImageNet(root), lambda: TinyImageNet.check_images(root)):
        with pytest.raises(DataRootError) as info:
            build()
        message = str(info.value)
        assert '\n' not in message and message.startswith(f'{root}: 16 bad image files ')
        assert '(10 truncated, 3 zero-byte, 3 non-image), e.g. train/' in message
        assert message.endswith('; fix or remove them, or set '
                                'train_dataloader.dataset.bad_data=skip')
    with pytest.raises(ValueError, match="bad_data='skp' unknown; valid: strict, skip"):
        TinyImageNet(root, bad_data='skp')


def test_check_data_before_training_runs_the_scan(broken):
    root, _ = broken
    cfg = Config.fromfile(str(ROOT / 'configs' / 'mocov2_r18_tiny.py'))
    cfg.train_dataloader.dataset.data_root = root
    with pytest.raises(DataRootError, match='16 bad image files'):
        check_data(cfg)
    cfg.train_dataloader.dataset.bad_data = 'skip'
    check_data(cfg)


def test_skip_keeps_exactly_the_valid_files_and_counts_the_rest(broken):
    root, chosen = broken
    bad = {p for k in KINDS for p in chosen[k]}
    lines = _log_lines()
    ds = TinyImageNet(root, bad_data='skip', view=None)
    assert [p for p, _ in ds.samples] == [p for p in _train_files(root) if p not in bad]
    assert ds.skipped_files == 16 and len(ds) == 104 - 16
    assert lines == [f'{root}: skipped 16 bad image files (10 truncated, 3 zero-byte, '
                     f'3 non-image) (bad_data=skip), e.g. ' + ', '.join(
                         str(Path(p).relative_to(root)) for p in sorted(bad)[:3])]
    wnids = sorted(Path(root, 'wnids.txt').read_text().split())
    assert ds.classes == wnids
    for i, (path, label) in enumerate(ds.samples):
        assert label == wnids.index(Path(path).parts[-3]) == ds.targets[i]
    assert all(ds[i]['inputs'].mode == 'RGB' for i in range(len(ds)))


def _labels_through_loader(ds, num_workers: int = 2) -> list:
    loader = DataLoader(ds, batch_size=8, num_workers=num_workers, shuffle=False)
    batches = list(loader)
    assert all(b['inputs'].shape[1:] == (3, 16, 16) for b in batches)
    return torch.cat([b['data_samples'] for b in batches]).tolist()


def test_file_that_breaks_after_the_scan_is_counted_and_replaced(broken):
    root, _ = broken
    ds = TinyImageNet(root, bad_data='skip', input_size=16, view='test')
    assert _labels_through_loader(ds) == ds.targets
    late = [5, 6, len(ds) - 1]  # two neighbours and the last: the next readable one stands in
    for i in late:
        truncate_image_file(ds.samples[i][0])
    labels = _labels_through_loader(ds)  # two workers meet the broken files; none dies
    expected = list(ds.targets)
    expected[5] = expected[6] = ds.targets[7]
    expected[-1] = ds.targets[0]
    assert labels == expected
    assert ds.skipped_files == 16 + 3  # flags set in the workers reach the main process
    plain = TinyImageNet(root, bad_data='skip', view=None)  # a new scan drops them up front
    assert plain.skipped_files == 19 and len(plain) == len(ds) - 3


def test_strict_file_that_breaks_later_is_a_one_line_error(tiny):
    ds = TinyImageNet(tiny, input_size=16, view='test')
    path = ds.samples[3][0]
    truncate_image_file(path)
    with pytest.raises(BadImageError) as info:
        ds[3]
    message = str(info.value)
    assert message.startswith(f'{path}: truncated image file (OSError: image file is truncated')
    assert '\n' not in message and message.endswith(
        '; fix or remove it, or set train_dataloader.dataset.bad_data=skip')
    # Re-raised by the DataLoader, still one line. One worker: torch waits 5 s for each worker
    # of a loader that raised before it lets the loader go.
    with pytest.raises(BadImageError) as info:
        _labels_through_loader(ds, num_workers=1)
    message = str(info.value)
    assert '\n' not in message and message.startswith(f'{path}: truncated image file')
    assert message.endswith('(in DataLoader worker process 0)')
    assert ds.skipped_files == 0


def test_odd_formats_convert_to_rgb(tmp_path):
    paths = write_odd_format_images(tmp_path / 'flat' / 'odd', size=8, seed=3)
    ds = ImageFolderDataset(str(tmp_path / 'flat'), view=None)
    assert [p for p, _ in ds.samples] == paths and ds.skipped_files == 0
    images = {Path(p).stem: np.asarray(ds[i]['inputs']) for i, p in enumerate(paths)}
    assert all(a.dtype == np.uint8 and a.shape == (8, 8, 3) for a in images.values())
    wide = np.asarray(Image.open(tmp_path / 'flat' / 'odd' / 'odd_I16.png'), dtype=np.float64)
    assert wide[0, :2].tolist() == [0, 65535] and wide.std() > 10000
    for c in range(3):  # 16-bit scaled by 255/65535, not clipped at 255
        np.testing.assert_array_equal(images['odd_I16'][..., c], np.round(wide * 255 / 65535))
    assert images['odd_I16'][0, :2, 0].tolist() == [0, 255] and images['odd_I16'].std() > 40
    grey = images['odd_L']
    assert (grey[..., 0] == grey[..., 1]).all() and (grey[..., 1] == grey[..., 2]).all()
    np.testing.assert_array_equal(images['odd_RGBA'], images['odd_RGB'])  # alpha is dropped
    palette = Image.open(tmp_path / 'flat' / 'odd' / 'odd_P.png')
    np.testing.assert_array_equal(images['odd_P'], np.asarray(palette.convert('RGBA'))[..., :3])


def test_empty_and_hidden_folders_are_not_classes(tmp_path):
    import torchvision
    root = make_fake_image_folder(tmp_path, classes=('b_dog', 'a_cat'), splits=('train',),
                                  per_class=2)
    reference = torchvision.datasets.ImageFolder(str(tmp_path / 'train'))
    Path(root, 'train', 'c_empty').mkdir()
    Path(root, 'train', 'd_notes').mkdir()
    Path(root, 'train', 'd_notes', 'readme.txt').write_text('not an image')
    Path(root, 'train', 'a_cat', '._0.png').write_bytes(b'\x00\x05\x16\x07 AppleDouble')
    make_fake_image_folder(Path(root, 'train', '.ipynb_checkpoints'), classes=('x',), splits=(),
                           per_class=1)
    make_fake_image_folder(Path(root, 'train', 'a_cat'), classes=('.thumbs',), splits=(),
                           per_class=1)
    ds = ImageFolderDataset(root, split='train', view=None)  # strict: hidden garbage unread
    assert ds.classes == ['a_cat', 'b_dog'] == reference.classes
    assert ds.samples == reference.samples  # torchvision's files and order, hidden ones out
    tiny = make_fake_tiny_imagenet(tmp_path / 't', num_classes=2, train_per_class=1, size=8)
    wnid = sorted(Path(tiny, 'wnids.txt').read_text().split())[1]
    Path(tiny, 'train', wnid, 'images', '._x.JPEG').write_bytes(b'junk')
    Path(tiny, 'train', '.hidden', 'images').mkdir(parents=True)
    ds = TinyImageNet(tiny, view=None)
    assert ds.classes == sorted(Path(tiny, 'wnids.txt').read_text().split()) and len(ds) == 2


def test_scan_results_are_cached_by_path_size_and_mtime(clean_tiny, tmp_path, monkeypatch):
    files = _train_files(clean_tiny)[:12]
    cache = tmp_path / 'scan.json'
    assert scan_image_files(files, cache_file=str(cache)).bad == 0 and cache.is_file()
    checked = []
    real = data_scan.check_image
    monkeypatch.setattr(data_scan, 'check_image', lambda p: checked.append(p) or real(p))
    assert scan_image_files(files).ok == 12 and checked == []  # in-process results
    data_scan._MEMO.clear()
    assert scan_image_files(files, cache_file=str(cache)).ok == 12 and checked == []  # the file
    copy = tmp_path / 'copy.JPEG'
    shutil.copy(files[0], copy)
    assert scan_image_files([copy]).ok == 1 and checked == [str(copy)]
    truncate_image_file(copy)  # new size: checked again
    assert scan_image_files([copy], cache_file=str(cache)).truncated == [str(copy)]
    data_scan._MEMO.clear()
    assert scan_image_files([copy], cache_file=str(cache)).truncated == [str(copy)]
    assert checked == [str(copy)] * 2


@pytest.mark.slow
def test_record_carries_the_skipped_count(tmp_path):
    cfg = Config.fromfile(str(ROOT / 'configs' / 'mocov2_r18_tiny.py'))
    protocols = {'knn': {'settings': {}, 'metrics': {'top1': 50.0}}}
    for meta, stored in ((dict(world_size=1, data_skipped=3), 3), (dict(data_skipped=0), 0),
                         ({}, None)):
        run = describe_run(cfg, meta)
        assert run['data_skipped'] == stored
        path = record_evaluation(protocols, run, 'tiny-imagenet', str(tmp_path))
        record = json.loads(path.read_text())
        assert record['extra'].get('data_skipped', 'absent') == (
            'absent' if stored is None else stored)
