"""Exported encoders: torchvision's ResNet built by the sidecar's line takes the weights with
strict=True and computes the evaluations' features, for a real training checkpoint (small
stem), the random encoder, the authors' and torchvision layouts and ResNet-50; the sidecar
holds the stem, the evaluations' input at the run's size (its transform is the evaluations'
view) and the checkpoint's sha256; bad input is one line and writes nothing."""
import json
import logging
import os

import numpy as np
import pytest
import safetensors.torch
import torch
import torchvision
from mmengine.logging import MMLogger
from PIL import Image

import benchmark.evaluation.evaluate as evaluate_module
from benchmark.data.eval_input import eval_input
from benchmark.data.views import build_view
from benchmark.engine import export
from benchmark.engine.compat import manager_instances
from benchmark.engine.config_file import merge_options, read_config
from benchmark.engine.export import RANDOM, build_line, export_backbone, export_run
from benchmark.evaluation.features import extract_features
from methods.backbones import build_resnet
from tests.conftest import ROOT, tiny_backbone
from tools import train

CONFIG = 'configs/mixco_r18_tiny.py'
CONFIG_R18 = str(ROOT / CONFIG)  # ResNet-18, ImageNet stem
SIZE = 16


def tiny_options(data_root: str) -> dict:
    """A one-epoch MixCo run of 4 steps at 16 px with the small stem."""
    return {'train_dataloader.dataset.data_root': data_root,
            'train_dataloader.dataset.input_size': SIZE, 'train_dataloader.batch_size': 8,
            'train_dataloader.num_workers': 0, 'train_dataloader.persistent_workers': False,
            'train_cfg.max_epochs': 1, 'model.queue_size': 16, 'model.backbone.small_stem': True}


@pytest.fixture(scope='module')
def trained(tmp_path_factory, fake_tiny):
    """(work dir, config) of a real training run through tools/train.py's runner."""
    work = tmp_path_factory.mktemp('run') / 'work'
    before = set(manager_instances(MMLogger))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv('WANDB_MODE', 'disabled')
        patch.chdir(ROOT)
        options = [f'{k}={v}' for k, v in tiny_options(fake_tiny).items()]
        runner, _ = train.build_runner(train.parse_args(
            [CONFIG, '--work-dir', str(work), '--no-eval', '--cfg-options', *options]))
        runner.train()
    instances = manager_instances(MMLogger)
    for name in set(instances) - before:  # their streams close with this module
        logger = instances[name]
        for handler in [h for h in logger.handlers if type(h) is logging.StreamHandler]:
            logger.removeHandler(handler)
    cfg = read_config(str(ROOT / CONFIG))
    merge_options(cfg, tiny_options(fake_tiny))
    return str(work), cfg


def evaluated_backbone(monkeypatch, cfg, checkpoint: str) -> torch.nn.Module:
    """The encoder `evaluate_checkpoint` (tools/eval.py) evaluates for ``checkpoint``."""
    seen = []

    def capture(backbone, *args, **kwargs):
        seen.append(backbone)
        return {}
    monkeypatch.setattr(evaluate_module, 'evaluate_backbone', capture)
    evaluate_module.evaluate_checkpoint(cfg, checkpoint, ['knn'], num_workers=0, device='cpu')
    return seen[0]


def loaded_export(paths) -> torch.nn.Module:
    """What a user types: the sidecar's build line, then torch's or safetensors' load."""
    sidecar = json.loads(open(paths[1]).read())
    scope = {'torch': torch, 'torchvision': torchvision}
    exec(sidecar['build'], scope)
    model = scope['m']
    load = (safetensors.torch.load_file if paths[0].endswith('.safetensors')
            else lambda path: torch.load(path, weights_only=True))
    result = model.load_state_dict(load(paths[0]))  # strict=True is its default
    assert not result.missing_keys and not result.unexpected_keys
    return model


def features(model: torch.nn.Module, size: int = SIZE, n: int = 6) -> torch.Tensor:
    """The evaluations' feature extraction (eval mode) over fixed random images."""
    gen = torch.Generator().manual_seed(0)
    data = [dict(inputs=torch.randn(3, size, size, generator=gen), data_samples=i % 2)
            for i in range(n)]
    return extract_features(model, data, batch_size=4, progress=False)[0]


@pytest.mark.slow
@pytest.mark.parametrize('fmt', ['torchvision', 'safetensors'])
def test_trained_checkpoint_exports_the_evaluated_encoder(trained, fmt, tmp_path, monkeypatch):
    work, cfg = trained
    paths = export_run(work, fmt, str(tmp_path))  # the config comes from the checkpoint's meta
    assert paths == [str(tmp_path / f'epoch_1_backbone{export.FORMATS[fmt]}'),
                     str(tmp_path / f'epoch_1_backbone{export.FORMATS[fmt]}.json')]
    sidecar = json.loads(open(paths[1]).read())
    assert sidecar['stem'] == 'small' and sidecar['build'] == build_line(18, True)
    assert sidecar['checkpoint_sha256'] == export.sha256_of(os.path.join(work, 'epoch_1.pth'))
    model = loaded_export(paths)
    reference = evaluated_backbone(monkeypatch, cfg, os.path.join(work, 'epoch_1.pth'))
    torch.testing.assert_close(features(model), features(reference), rtol=1e-6, atol=1e-6)
    assert features(model).shape == (6, 512)


@pytest.mark.slow
def test_sidecar_input_is_the_evaluations_view_at_the_runs_size(trained, tmp_path):
    """The run's input size comes from its config (16 px, not the dataset's default 224)."""
    paths = export_run(trained[0], 'torchvision', str(tmp_path))
    sidecar = json.loads(open(paths[1]).read())
    assert sidecar['data'] == 'tiny-imagenet' and sidecar['input_size'] == SIZE
    assert {k: sidecar[k] for k in eval_input(dict(type='TinyImageNet'))} == eval_input(
        dict(type='TinyImageNet', input_size=SIZE))
    view = build_view('test', SIZE)  # resize, crop, to tensor, normalize
    image = Image.fromarray(np.arange(3 * 20 * 30, dtype=np.uint8).reshape(20, 30, 3))
    transform = eval(sidecar['transform'], {'torchvision': torchvision})
    assert torch.equal(transform(image), view(image))


@pytest.mark.slow
@pytest.mark.parametrize('fmt', ['torchvision', 'safetensors'])
def test_random_encoder_is_the_one_eval_tool_evaluates(trained, fmt, tmp_path, monkeypatch):
    _, cfg = trained
    paths = export_backbone(RANDOM, fmt, str(tmp_path / f'r{export.FORMATS[fmt]}'), cfg)
    assert json.loads(open(paths[1]).read())['checkpoint_sha256'] is None
    reference = evaluated_backbone(monkeypatch, cfg, 'random')
    torch.testing.assert_close(features(loaded_export(paths)), features(reference),
                               rtol=1e-6, atol=1e-6)


def bn_statistics(model: torch.nn.Module) -> None:
    """Running statistics that differ from a fresh model's, so a lost buffer shows."""
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)


@pytest.mark.parametrize('depth,layout', [(18, 'authors'), (34, 'torchvision'),
                                          (50, 'torchvision')])
def test_other_layouts_and_depths(depth, layout, tmp_path, monkeypatch):
    """The authors' checkpoint (its MLP head under fc.* is dropped) and torchvision's state
    dicts, ResNet-18/34/50 with the ImageNet stem: the export computes the features of the
    encoder tools/eval.py evaluates."""
    torch.manual_seed(depth)
    source = getattr(torchvision.models, f'resnet{depth}')()
    bn_statistics(source)
    state = source.state_dict()
    if layout == 'authors':
        state = {f'module.encoder_q.{k}': v for k, v in state.items()}
        state['module.encoder_q.fc.0.weight'] = torch.zeros(512, 512)
        state = {'state_dict': state, 'arch': 'resnet18'}
    path = tmp_path / f'{layout}.pth'
    torch.save(state, path)
    cfg = read_config(str(ROOT / f'configs/mixco_r{depth}_tiny.py'))
    paths = export_backbone(str(path), 'safetensors', None, cfg)
    assert paths[0] == str(tmp_path / f'{layout}_backbone.safetensors')
    assert json.loads(open(paths[1]).read())['stem'] == 'imagenet'
    reference = evaluated_backbone(monkeypatch, cfg, str(path))
    torch.testing.assert_close(features(loaded_export(paths), 32, 2),
                               features(reference, 32, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('depth', [18, 34, 50])
@pytest.mark.parametrize('small', [False, True])
def test_build_line_builds_build_resnet(depth, small):
    scope = {'torch': torch, 'torchvision': torchvision}
    exec(build_line(depth, small), scope)
    model = scope['m']
    model.load_state_dict(build_resnet(depth, small).state_dict(), strict=True)
    assert str(model) == str(build_resnet(depth, small))  # same layers, strides and paddings


# -- bad input: one line, before anything is written ------------------------------------------

@pytest.fixture
def resnet_checkpoint(tmp_path) -> str:
    path = tmp_path / 'ckpt' / 'epoch_2.pth'
    path.parent.mkdir()
    state = {f'backbone.{k}': v for k, v in build_resnet(18).state_dict().items()}
    torch.save({'state_dict': state,
                'meta': {'epoch': 2}}, path)
    return str(path)


def test_output_exists_is_refused_unless_forced(resnet_checkpoint, tmp_path):
    out = tmp_path / 'out' / 'model.pth'
    out.parent.mkdir()
    (tmp_path / 'out' / 'model.pth.json').write_text('mine')
    with pytest.raises(FileExistsError, match=r'model\.pth\.json exists already; pass --force'):
        export_backbone(resnet_checkpoint, 'torchvision', str(out))
    assert sorted(os.listdir(out.parent)) == ['model.pth.json']
    assert (tmp_path / 'out' / 'model.pth.json').read_text() == 'mine'
    paths = export_backbone(resnet_checkpoint, 'torchvision', str(out), CONFIG_R18, force=True)
    assert paths == [str(out), f'{out}.json']
    assert sorted(os.listdir(out.parent)) == ['model.pth', 'model.pth.json']


@pytest.mark.parametrize('case,words', [
    ('missing', ['nope.pth', 'not found']),
    ('no_backbone', ['unknown checkpoint layout']),
    ('not_resnet', ['does not fit the backbone', 'depth, small_stem']),
    ('format', ["'onnx' unknown", 'torchvision, safetensors']),
    ('random_without_config', ["'random' needs --config"]),
    ('no_config', ['epoch_2.pth holds no config', '--config']),
    ('config_mismatch', ['epoch_2.pth', 'does not fit the backbone', 'layer1.0.conv3.weight']),
    ('empty_work_dir', ['holds no checkpoint']),
    ('no_dataset', ['no train_dataloader.dataset with a type', '--config']),
])
def test_bad_input_is_one_line_and_writes_nothing(case, words, resnet_checkpoint, tmp_path):
    out = tmp_path / 'out'
    bad = tmp_path / 'bad.pth'
    if case == 'no_backbone':
        torch.save({'state_dict': {'encoder.weight': torch.ones(1)}}, bad)
    if case == 'not_resnet':
        torch.save({'state_dict': {f'backbone.{k}': v
                                   for k, v in tiny_backbone().state_dict().items()}}, bad)
    source, fmt, config = str(bad), 'torchvision', CONFIG_R18
    if case == 'missing':
        source = str(tmp_path / 'nope.pth')
    elif case == 'format':
        source, fmt = resnet_checkpoint, 'onnx'
    elif case == 'random_without_config':
        source, config = RANDOM, None
    elif case == 'no_config':
        source, config = resnet_checkpoint, None
    elif case == 'config_mismatch':
        source, config = resnet_checkpoint, str(ROOT / 'configs/mixco_r50_tiny.py')
    elif case == 'empty_work_dir':
        source = str(out)
        out.mkdir()
    elif case == 'no_dataset':
        source, config = resnet_checkpoint, read_config(CONFIG_R18)
        config.train_dataloader.dataset = None
    with pytest.raises((ValueError, OSError)) as err:
        export_run(source, fmt, str(out), config=config)
    message = str(err.value)
    assert '\n' not in message and all(w in message for w in words), message
    assert not out.exists() or not os.listdir(out)


def test_no_weights_stay_without_their_sidecar(resnet_checkpoint, monkeypatch):
    def full_disk(path, *args, **kwargs):  # the sidecar is created, then its write fails
        open(path, *args, **kwargs).close()
        raise OSError('No space left on device')
    monkeypatch.setattr(export, 'open', full_disk, raising=False)
    with pytest.raises(OSError, match='No space'):
        export_run(resnet_checkpoint, 'torchvision', config=CONFIG_R18)
    assert os.listdir(os.path.dirname(resnet_checkpoint)) == ['epoch_2.pth']


def test_a_narrowed_encoder_is_refused_in_one_line(tmp_path):
    """torchvision has no builder for a narrowed ResNet, so its sidecar could not say how to
    build it: refused before anything is written."""
    cfg = read_config(str(ROOT / 'configs/mocov2_r18_digits.py'))
    merge_options(cfg, {'model.backbone.width': 0.25})
    with pytest.raises(ValueError, match=r'^export: model.backbone.width=0.25 has no torchvision '
                                         r'builder; export an encoder of width 1$'):
        export_backbone(RANDOM, 'torchvision', str(tmp_path / 'r.pth'), cfg)
    assert not list(tmp_path.iterdir())
