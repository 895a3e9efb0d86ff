"""benchmark.harness.speed.views: the views of one batch, device path vs PIL (vs kornia)."""
import builtins

import pytest
import torch

from benchmark.harness.speed import views as speed_views
from benchmark.harness.speed.views import bench_views, kornia_views, median_ms
from benchmark.harness.speed.timing import Settings


def test_median_ms_warms_up_once_then_takes_the_median(monkeypatch):
    times = iter([0.001, 0.005, 0.002])
    monkeypatch.setattr(speed_views, 'timed', lambda fn, device: next(times))
    calls = []
    assert median_ms(lambda: calls.append(1), 3, torch.device('cpu')) == 2.0
    assert calls == [1]  # the warm-up; the timed runs went through `timed`


def test_kornia_missing_gives_none(monkeypatch):
    real_import = builtins.__import__

    def no_kornia(name, *args, **kwargs):
        if name.startswith('kornia'):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, '__import__', no_kornia)
    assert kornia_views(16, torch.device('cpu')) is None


def test_bench_views_times_both_paths(monkeypatch):
    monkeypatch.setattr(speed_views, 'kornia_views', lambda size, device: None)
    threads = torch.get_num_threads()
    s = Settings(batch=4, input_size=16, views_native=16, views_repeats=1)
    out = bench_views(s, torch.device('cpu'))
    ms = out['ms_per_batch']
    assert (out['batch'], out['native'], out['size'], out['device']) == (4, 16, 16, 'cpu')
    assert ms['device_path'] > 0 and ms['pil_per_image'] > 0 and ms['kornia'] is None
    assert ms['device_path_graphed'] is None and ms['device_path_compiled'] is None  # GPU only
    assert out['pil_over_device_path'] == ms['pil_per_image'] / ms['device_path']
    assert torch.get_num_threads() == threads  # the PIL timing's single thread is undone


def test_kornia_views_are_two_per_sample_views():
    pytest.importorskip('kornia')
    torch.manual_seed(0)
    x = torch.randint(0, 256, (6, 3, 24, 24), dtype=torch.uint8)
    views = kornia_views(16, torch.device('cpu'))(x)
    assert len(views) == 2 and all(v.shape == (6, 3, 16, 16) for v in views)
    assert not torch.equal(views[0], views[1])
    # per-sample parameters: no two images of a constant batch come out the same
    same = torch.full((6, 3, 24, 24), 128, dtype=torch.uint8)
    same[:, :, :12] = 30  # an edge, so that crops differ
    out = kornia_views(16, torch.device('cpu'))(same)[0].flatten(1)
    assert all(not torch.equal(out[i], out[j]) for i in range(6) for j in range(i))


def test_kornia_draws_one_jitter_order_per_batch():
    """Why kornia was not kept (README, Configs): its ColorJitter draws one order of the four
    adjustments per call, i.e. per batch, where torchvision's ColorJitter in the PIL path (and
    our device views) draw one per image. If kornia changes this, revisit that decision."""
    K = pytest.importorskip('kornia.augmentation')
    params = K.ColorJitter(0.4, 0.4, 0.4, 0.1, p=1.0).forward_parameters(torch.Size((8, 3, 16,
                                                                                     16)))
    assert params['brightness_factor'].shape == (8,)  # factors per image
    assert params['order'].shape == (4,)  # one order for the whole batch
