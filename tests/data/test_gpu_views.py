"""Views drawn on the device (benchmark.data.gpu_views) against the PIL path they replace.

Statistics: thousands of parameter sets from our batched sampler and from the PIL path's own
objects (the torchvision v2 transforms inside lightly's MoCoV2/SimCLR transforms, lightly's
GaussianBlur), compared with two-sample Kolmogorov-Smirnov and chi-square tests (fixed seeds,
p > 0.001), each with a control that the test rejects. Pixels: every operation against
torchvision / PIL on the same parameters, and whole views against the PIL path.
"""
import copy
import itertools
import types

import lightly.transforms.gaussian_blur as lightly_blur
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.functional as TF
from PIL import Image, ImageFilter
from scipy import stats

from benchmark.data import view_ops
from benchmark.data.gpu_views import GPUViewPreprocessor, apply_view, batch_generator
from benchmark.data.view_params import ViewParams, draw_view_params, view_spec
from benchmark.data.views import build_view
from benchmark.harness.speed.dispatch import DispatchCount

N = 4000  # parameter sets per distribution
P_MIN = 1e-3
DIGITS_VIEW = dict(name='mocov2', min_scale=0.6, gaussian_blur=0.0, random_gray_scale=0.0,
                   hf_prob=0.0)  # configs/mocov2_r18_digits.py


def pil_steps(view, size=32):
    """The PIL path's transform objects of one view, by role."""
    steps = build_view(view, size).transforms[0].transform.transforms
    kind = {type(t).__name__: t for t in steps}
    return types.SimpleNamespace(
        crop=kind['RandomResizedCrop'], hflip=kind['RandomHorizontalFlip'],
        vflip=kind['RandomVerticalFlip'], jitter=kind['RandomApply'],
        colour=kind['RandomApply'].transforms[0], gray=kind['RandomGrayscale'],
        blur=kind['GaussianBlur'], normalize=kind['Normalize'])


def ours(view, n=N, height=64, width=64, seed=1) -> ViewParams:
    return draw_view_params(view_spec(view, 32), n, height, width,
                            torch.Generator().manual_seed(seed))


def ks(a, b) -> float:
    return stats.ks_2samp(np.asarray(a, float), np.asarray(b, float)).pvalue


def chi2(a, b) -> float:
    """Homogeneity of two samples of categories (a, b: 1-D integer arrays)."""
    cats = sorted(set(np.unique(a)) | set(np.unique(b)))
    table = [[int(np.sum(np.asarray(s) == c)) for c in cats] for s in (a, b)]
    return stats.chi2_contingency(table)[1]


@pytest.mark.parametrize('view', ['mocov2', 'simclr', DIGITS_VIEW])
def test_spec_has_the_pil_path_numbers(view):
    spec, pil = view_spec(view, 32), pil_steps(view)
    assert spec.scale == tuple(pil.crop.scale) and spec.ratio == tuple(pil.crop.ratio)
    assert (spec.hf_prob, spec.vf_prob, spec.cj_prob, spec.gray_prob, spec.blur_prob) == (
        pil.hflip.p, pil.vflip.p, pil.jitter.p, pil.gray.p, pil.blur.prob)
    assert spec.jitter == tuple(None if r is None else tuple(r) for r in (
        pil.colour.brightness, pil.colour.contrast, pil.colour.saturation, pil.colour.hue))
    assert spec.sigmas == tuple(pil.blur.sigmas)
    assert list(spec.mean) == pil.normalize.mean and list(spec.std) == pil.normalize.std


def reference_crops(view, height, width, n=N):
    torch.manual_seed(0)
    crop, image = pil_steps(view).crop, Image.new('RGB', (width, height))
    boxes = [crop.make_params([image]) for _ in range(n)]
    return np.array([[b['top'], b['left'], b['height'], b['width']] for b in boxes])


def crop_stats(box, height, width):
    """Area fraction, aspect ratio, relative top and left position of (n, 4) boxes."""
    top, left, h, w = np.asarray(box, float).T
    return dict(area=h * w / (height * width), aspect=w / h,
                top=(top + 0.5) / (height - h + 1), left=(left + 0.5) / (width - w + 1))


@pytest.mark.parametrize('view,height,width', [('mocov2', 64, 64), ('simclr', 48, 80),
                                               (DIGITS_VIEW, 8, 8)])
def test_crops_are_distributed_as_random_resized_crop(view, height, width):
    a = crop_stats(ours(view, height=height, width=width).box, height, width)
    b = crop_stats(reference_crops(view, height, width), height, width)
    p = {key: ks(a[key], b[key]) for key in a}
    assert min(p.values()) > P_MIN, p


def test_crop_test_rejects_a_different_scale():
    a = crop_stats(ours(dict(name='mocov2', min_scale=0.25)).box, 64, 64)
    b = crop_stats(reference_crops('mocov2', 64, 64), 64, 64)
    assert ks(a['area'], b['area']) < P_MIN


def reference_jitter(view, n=N):
    torch.manual_seed(0)
    colour, image = pil_steps(view).colour, Image.new('RGB', (4, 4))
    draws = [colour.make_params([image]) for _ in range(n)]
    factors = np.array([[d[f'{k}_factor'] for k in ('brightness', 'contrast', 'saturation', 'hue')]
                        for d in draws])
    return factors, np.array([tuple(d['fn_idx'].tolist()) for d in draws])


def perm_ids(orders) -> np.ndarray:
    index = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    return np.array([index[tuple(int(v) for v in row)] for row in orders])


@pytest.mark.parametrize('view', ['mocov2', 'simclr'])
def test_jitter_factors_and_order_are_distributed_as_color_jitter(view):
    params = ours(view)
    factors, orders = reference_jitter(view)
    p = {op: ks(params.factors[:, i], factors[:, i])
         for i, op in enumerate(('brightness', 'contrast', 'saturation', 'hue'))}
    p['order'] = chi2(perm_ids(params.order), perm_ids(orders))
    assert min(p.values()) > P_MIN, p
    assert len(np.unique(perm_ids(params.order))) == 24
    # The control: hue from the brightness range is rejected.
    assert ks(params.factors[:, 0], factors[:, 3]) < P_MIN


def reference_decisions(view, monkeypatch, n=N):
    """Flip / jitter / grey / blur decisions and blur sigmas of the PIL path's own objects."""
    torch.manual_seed(0)
    np.random.seed(0)
    pil = pil_steps(view)
    applied = []
    jitter = copy.copy(pil.jitter)
    jitter.transforms = [lambda image: applied.append(1) or image]
    sigmas = []

    def recording_blur(radius):
        sigmas.append(radius)
        return ImageFilter.GaussianBlur(radius=radius)

    monkeypatch.setattr(lightly_blur, 'ImageFilter', types.SimpleNamespace(
        GaussianBlur=recording_blur))
    pair = Image.fromarray(np.array([[[0, 0, 0], [255, 0, 0]]], np.uint8))  # 1x2, asymmetric
    flips, jitters, grays, blurs = [], [], [], []
    for _ in range(n):
        flips.append(int(np.asarray(pil.hflip(pair))[0, 0, 0] == 255))
        before = len(applied)
        jitter(pair)
        jitters.append(len(applied) - before)
        grey = np.asarray(pil.gray(pair))[0, 1]
        grays.append(int(grey[0] == grey[1] == grey[2]))
        before = len(sigmas)
        pil.blur(pair)
        blurs.append(len(sigmas) - before)
    return dict(hflip=flips, jitter=jitters, gray=grays, blur=blurs), np.array(sigmas)


@pytest.mark.parametrize('view', ['mocov2', DIGITS_VIEW])
def test_decisions_and_blur_sigmas_are_distributed_as_the_pil_path(view, monkeypatch):
    params = ours(view)
    reference, sigmas = reference_decisions(view, monkeypatch)
    for key, drawn in reference.items():
        mine = getattr(params, key).long().numpy()
        if max(drawn) == 0:  # probability 0 (the digits view): never, on both paths
            assert mine.sum() == 0, key
        else:
            assert chi2(mine, drawn) > P_MIN, key
    if len(sigmas):
        assert ks(params.sigma[params.blur], sigmas) > P_MIN
        assert ks(params.sigma[params.blur] * 1.1, sigmas) < P_MIN  # the control
        assert chi2(params.gray.long().numpy(), np.zeros(N, int) + (np.arange(N) < N // 10)) \
            < P_MIN  # the control: p=0.2 against p=0.1


def pinned(n, height, width, **changes) -> ViewParams:
    """Identity parameters (full crop, no flip, jitter, grey or blur) with ``changes``."""
    params = ViewParams(
        box=torch.tensor([[0, 0, height, width]] * n), hflip=torch.zeros(n, dtype=torch.bool),
        vflip=torch.zeros(n, dtype=torch.bool), jitter=torch.zeros(n, dtype=torch.bool),
        factors=torch.tensor([[1.0, 1.0, 1.0, 0.0]] * n, dtype=torch.float64),
        order=torch.arange(4).repeat(n, 1), gray=torch.zeros(n, dtype=torch.bool),
        blur=torch.zeros(n, dtype=torch.bool), sigma=torch.ones(n, dtype=torch.float64))
    return params._replace(**changes)


def images(n=6, size=64, seed=0) -> np.ndarray:
    """Smooth random RGB images (n, size, size, 3) uint8, like photos at low resolution."""
    rng = np.random.RandomState(seed)
    return np.stack([np.asarray(Image.fromarray((rng.rand(8, 8, 3) * 255).astype(np.uint8))
                                .resize((size, size), Image.BICUBIC)) for _ in range(n)])


def as_batch(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(array).permute(0, 3, 1, 2).float() / 255


@pytest.mark.parametrize('size', [64, 224, 40])
def test_identity_parameters_give_the_normalised_resized_input(size):
    x, spec = as_batch(images()), view_spec('mocov2', size)
    out = apply_view(x, pinned(len(x), 64, 64), spec)
    mean, std = torch.tensor(spec.mean).view(1, 3, 1, 1), torch.tensor(spec.std).view(1, 3, 1, 1)
    # PIL's bilinear resize: plain bilinear when enlarging, its antialiasing filter (torch's
    # antialias=True reproduces it) when shrinking.
    resized = x if size == 64 else F.interpolate(x, size=size, mode='bilinear',
                                                 align_corners=False, antialias=size < 64)
    if size == 64:
        assert torch.equal(out, (x - mean) / std)
    else:  # the same weights, summed in another order: float32 rounding only
        torch.testing.assert_close(out, (resized - mean) / std, atol=1e-5, rtol=0)


def test_crop_and_flips_match_pil_resized_crop():
    arrays = images()
    boxes = torch.tensor([[0, 0, 64, 64], [5, 9, 20, 31], [30, 2, 34, 60], [11, 40, 3, 7],
                          [0, 0, 64, 50], [16, 16, 48, 48]])
    flips = torch.tensor([0, 1, 0, 1, 1, 0], dtype=torch.bool)
    params = pinned(6, 64, 64, box=boxes, hflip=flips, vflip=flips.roll(1))
    for size in (24, 32, 96):  # shrinking (antialiased), both, enlarging
        out = apply_view(as_batch(arrays), params, view_spec('mocov2', size, normalize=None))
        for b, (top, left, h, w) in enumerate(boxes.tolist()):
            ref = TF.resized_crop(Image.fromarray(arrays[b]), top, left, h, w, [size, size])
            ref = TF.hflip(ref) if flips[b] else ref
            ref = TF.vflip(ref) if flips.roll(1)[b] else ref
            # PIL rounds to uint8 after each of its two passes: 1/255 at most
            assert (out[b] - TF.to_tensor(ref)).abs().max() <= 1.01 / 255, (size, b)


@pytest.mark.parametrize('op,name', [(view_ops.adjust_brightness, 'adjust_brightness'),
                                     (view_ops.adjust_contrast, 'adjust_contrast'),
                                     (view_ops.adjust_saturation, 'adjust_saturation'),
                                     (view_ops.adjust_hue, 'adjust_hue')])
def test_jitter_ops_match_torchvision_per_image(op, name):
    x = as_batch(images())
    factors = torch.tensor([-0.5, -0.1, 0.0, 0.07, 0.3, 0.5]) if name == 'adjust_hue' else \
        torch.tensor([0.0, 0.6, 0.9, 1.0, 1.4, 1.8])
    out = op(x.clone(), factors)
    ref = torch.stack([getattr(TF, name)(x[b], float(factors[b])) for b in range(len(x))])
    # torchvision's tensor luma is 0.2989 R, ours PIL's 0.299 R: the blends differ by at most
    # |1 - factor| * 1e-4 (the ops themselves: 1e-5)
    atol = 2e-4 if name in ('adjust_contrast', 'adjust_saturation') else 1e-5
    torch.testing.assert_close(out, ref, atol=atol, rtol=0)


def test_grayscale_is_pil_luma():
    arrays = images()
    out = view_ops.grayscale(as_batch(arrays))[:, 0]
    ref = np.stack([np.asarray(Image.fromarray(a).convert('L')) for a in arrays]) / 255
    # PIL: 16-bit fixed-point weights (19595, 38470, 7471) / 2^16, rounded to uint8
    assert np.abs(out.numpy() - ref).max() <= 0.51 / 255


def test_blur_matches_pil_gaussian_blur():
    arrays = images(n=7, size=40)
    arrays[:, :, 20:] = 255  # a hard edge, and image borders that PIL pads at every pass
    sigma = torch.tensor([0.1, 0.3, 0.8, 1.0, 1.5, 2.0, 3.7], dtype=torch.float64)
    out = view_ops.gaussian_blur(as_batch(arrays), sigma, max_sigma=3.7)
    for b, s in enumerate(sigma.tolist()):
        ref = TF.to_tensor(Image.fromarray(arrays[b]).filter(ImageFilter.GaussianBlur(radius=s)))
        # PIL rounds to uint8 after each of its six box passes
        assert (out[b] - ref).abs().max() <= 3 / 255, s
        assert (out[b] - ref).abs().mean() <= 0.5 / 255, s


def pil_view(array, params, b, spec):
    """The PIL path's steps (torchvision functional on PIL) with image b's parameters."""
    top, left, h, w = params.box[b].tolist()
    image = TF.resized_crop(Image.fromarray(array), top, left, h, w, [spec.input_size] * 2)
    image = TF.hflip(image) if params.hflip[b] else image
    if params.jitter[b]:
        fns = (TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation, TF.adjust_hue)
        for op in params.order[b].tolist():
            if spec.jitter[op] is not None:
                image = fns[op](image, float(params.factors[b, op]))
    image = TF.rgb_to_grayscale(image, 3) if params.gray[b] else image
    if params.blur[b]:
        image = image.filter(ImageFilter.GaussianBlur(radius=float(params.sigma[b])))
    return TF.to_tensor(image)


@pytest.mark.parametrize('view,size', [('mocov2', 96), (dict(name='simclr', cj_hue=0.0), 48)])
def test_whole_views_match_the_pil_path_on_the_same_parameters(view, size):
    arrays = images(n=24)
    spec = view_spec(view, size, normalize=None)
    params = draw_view_params(spec, len(arrays), 64, 64, torch.Generator().manual_seed(3))
    assert params.jitter.any() and params.gray.any() and params.blur.any() and params.hflip.any()
    out = apply_view(as_batch(arrays), params, spec)
    diff = torch.stack([(out[b] - pil_view(arrays[b], params, b, spec)).abs()
                        for b in range(len(arrays))])
    # uint8 rounding of every PIL step; PIL's hue shift works on 8-bit HSV (up to ~13/255)
    assert diff.mean() <= 2 / 255
    assert diff.max() <= (16 if spec.jitter[3] else 6) / 255
    assert diff[~params.jitter].max() <= 3 / 255  # crop, flip, grey, blur only


def test_every_image_gets_its_own_parameters():
    x = torch.full((2, 3, 64, 64), 128, dtype=torch.uint8)
    x[:, 0, :, :32] = 255  # two identical, asymmetric images
    pre = GPUViewPreprocessor(view='mocov2', input_size=32)
    out = pre(dict(inputs=x, data_samples=torch.tensor([0, 1]), seed=torch.tensor([7, 8])))
    q, k = out['inputs']
    assert not torch.equal(q[0], q[1]) and not torch.equal(q[0], k[0])
    params = ours('mocov2', n=64)
    assert len({tuple(b) for b in params.box.tolist()}) > 60
    assert 0 < params.hflip.sum() < 64 and 0 < params.blur.sum() < 64


def test_same_seeds_same_views_other_seeds_other_views():
    x = torch.from_numpy(images(n=4)).permute(0, 3, 1, 2).contiguous()
    pre = GPUViewPreprocessor(view='simclr', input_size=32)

    def views(seeds):
        torch.rand(5)  # the process's generator moves on: the views must not care
        out = pre(dict(inputs=x, data_samples=torch.arange(4), seed=torch.tensor(seeds)))
        return out['inputs']

    a, b, c = views([1, 2, 3, 4]), views([1, 2, 3, 4]), views([1, 2, 3, 5])
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert not torch.equal(a[0], c[0])
    pre.chunk_size = 3  # images are processed on their own: chunks change nothing
    assert all(torch.equal(u, v) for u, v in zip(a, views([1, 2, 3, 4])))
    first = batch_generator(torch.tensor([1, 2, 3, 4]))
    assert torch.equal(torch.rand(8, generator=first),
                       torch.rand(8, generator=batch_generator(torch.tensor([1, 2, 3, 4]))))


@pytest.mark.cuda
@pytest.mark.parametrize('view', ['mocov2', 'simclr'])
def test_views_on_cuda_equal_the_views_on_cpu(view):
    """The parameters come from a CPU generator seeded by the samples: on the GPU the same
    seeds give the same views, up to float32 rounding of the ops there."""
    x = torch.from_numpy(images(n=16)).permute(0, 3, 1, 2).contiguous()
    batch = dict(inputs=x, data_samples=torch.arange(16), seed=torch.arange(100, 116))
    pre = GPUViewPreprocessor(view=view, input_size=48)
    on_cpu = pre(dict(batch), training=True)['inputs']
    pre.cuda()
    on_gpu = pre(dict(batch), training=True)['inputs']
    assert all(v.device.type == 'cuda' for v in on_gpu)
    for a, b in zip(on_cpu, on_gpu):
        torch.testing.assert_close(b.cpu(), a, rtol=0, atol=1e-4)


def test_preprocessor_output_and_input_errors():
    x = torch.from_numpy(images(n=4, size=16)).permute(0, 3, 1, 2).contiguous()
    labels = torch.tensor([3, 1, 4, 1])
    out = GPUViewPreprocessor(view=DIGITS_VIEW, input_size=24)(
        dict(inputs=x, data_samples=labels, seed=torch.arange(4)), training=True)
    assert set(out) == {'inputs', 'data_samples'} and torch.equal(out['data_samples'], labels)
    assert [tuple(v.shape) for v in out['inputs']] == [(4, 3, 24, 24)] * 2
    assert all(v.dtype == torch.float32 for v in out['inputs'])
    listed = GPUViewPreprocessor(view=DIGITS_VIEW, input_size=24)(  # as pseudo_collate hands
        dict(inputs=list(x), data_samples=labels, seed=torch.arange(4)), training=True)
    assert all(torch.equal(a, b) for a, b in zip(listed['inputs'], out['inputs']))
    with pytest.raises(ValueError, match=r'uint8 batches .* got torch.float32 .*view=raw_uint8'):
        GPUViewPreprocessor(input_size=24)(dict(inputs=x.float(), data_samples=labels))
    with pytest.raises(ValueError, match=r'uint8 batches .* got list; .*view=raw_uint8'):
        GPUViewPreprocessor(input_size=24)(dict(inputs=[x[0], x[1, :, :8]]))
    with pytest.raises(ValueError, match='input_size: missing'):
        GPUViewPreprocessor()
    with pytest.raises(ValueError, match="unknown override 'min_scal'"):
        view_spec(dict(name='mocov2', min_scal=0.5), 32)
    with pytest.raises(ValueError, match='rr_prob=0.5'):
        view_spec(dict(name='simclr', rr_prob=0.5), 32)
    with pytest.raises(ValueError, match="view 'test' cannot be drawn on the device"):
        view_spec('test', 32)


@pytest.mark.parametrize('view', ['mocov2', 'simclr', DIGITS_VIEW])
@pytest.mark.parametrize('seeded', [True, False])
def test_one_call_is_a_fixed_set_of_operations_that_reads_nothing_back(view, seeded):
    """Both views of a batch: the same operations for 32 images as for 128 (no chunk, no
    subset), no more than 800, and none whose result the host must read (item, nonzero, a
    boolean index, ...): on a GPU, nothing to wait for."""
    pre = GPUViewPreprocessor(view=view, input_size=24)
    ops = {}
    for b in (32, 128):
        x = torch.randint(0, 256, (b, 3, 16, 16), dtype=torch.uint8)
        batch = dict(inputs=x, data_samples=torch.arange(b))
        if seeded:
            batch['seed'] = torch.arange(b)
        with DispatchCount() as count:
            pre(batch, training=True)
        assert not count.host_reads, count.host_reads
        ops[b] = count.ops
    assert ops[128] == ops[32] <= 800, ops


def test_views_are_drawn_in_one_pass_with_one_parameter_transfer(monkeypatch):
    """Every view of every image from one draw of parameters, copied over once."""
    from benchmark.data import gpu_views
    transfers, passes = [], []
    real_to_device, real_draw = gpu_views.to_device, gpu_views.draw_view
    monkeypatch.setattr(gpu_views, 'to_device',
                        lambda p, *args: transfers.append(p.shape) or real_to_device(p, *args))
    monkeypatch.setattr(gpu_views, 'draw_view',
                        lambda x, p, spec: passes.append(x.shape[0]) or real_draw(x, p, spec))
    pre = GPUViewPreprocessor(view='mocov2', input_size=24, num_views=3)
    x = torch.randint(0, 256, (8, 3, 16, 16), dtype=torch.uint8)
    views = pre(dict(inputs=x, seed=torch.arange(8)))['inputs']
    assert transfers == [(8, 3, 16, 16), (24, gpu_views.PARAM_COLUMNS)] and passes == [24]
    assert len(views) == 3 and all(v.shape == (8, 3, 24, 24) for v in views)


@pytest.mark.cuda
@pytest.mark.parametrize('compiled, graph', [(False, False), (False, True), (True, True)])
def test_views_and_a_mixco_step_never_wait_for_the_gpu(compiled, graph):
    """Views (eager, replayed from a CUDA graph, compiled and replayed) and a MixCo training
    step (forward, backward, SGD, queue) with torch's sync check set to fail on any wait of
    the host for the device."""
    from benchmark.harness.speed.step import build_step, train_step
    from benchmark.harness.speed.timing import Settings
    device = torch.device('cuda')
    model, opt = build_step('mixco', Settings(input_size=32, batch=16), device)
    pre = GPUViewPreprocessor(view='mocov2', input_size=32, compile=compiled,
                              graph=graph).to(device)
    x = torch.randint(0, 256, (16, 3, 64, 64), dtype=torch.uint8).pin_memory()
    batch = dict(inputs=x, data_samples=torch.arange(16), seed=torch.arange(16))

    def step():
        train_step(model, opt, pre(dict(batch), training=True)['inputs'], torch.bfloat16)

    step()  # the first call: cuDNN, cuBLAS and the compiler set up, the graph captured
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('error')
    try:
        for _ in range(2):
            step()
    finally:
        torch.cuda.set_sync_debug_mode('default')
    torch.cuda.synchronize()
