"""Exported encoders: torchvision's ResNet built by the sidecar's line takes the weights with
strict=True and computes the evaluations' features, for a real training checkpoint (small
stem), the random encoder, the authors' and torchvision layouts and ResNet-50; the sidecar
holds the recipe, preprocessing, config and provenance; bad input is one line and writes
nothing."""
import json
import logging
import os
import sys

import pytest
import safetensors
import safetensors.torch
import torch
import torchvision
from mmengine.logging import MMLogger
from PIL import Image

import benchmark.evaluation.evaluate as evaluate_module
from benchmark.data.views import build_view
from benchmark.engine import export
from benchmark.engine.compat import manager_instances
from benchmark.engine.config.check import merge_options, read_config
from benchmark.engine.export import (RANDOM, build_from_statement, build_statement,
                                     export_backbone, export_run, resnet_recipe)
from benchmark.evaluation.features import extract_features
from benchmark.reports.records import build_record, write_record
from methods.backbones import build_resnet
from tests.conftest import ROOT, tiny_backbone
from tools import train

CONFIG = 'configs/mixco_r18_tiny.py'
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


def loaded_export(paths, monkeypatch) -> torch.nn.Module:
    """What a user types: the sidecar's build line, then its load line, in the export's folder."""
    sidecar = json.loads(open(paths[1]).read())
    assert os.path.basename(paths[0]) == sidecar['weights']
    scope = {'torch': torch, 'torchvision': torchvision, 'safetensors': safetensors}
    exec(sidecar['build'], scope)
    monkeypatch.chdir(os.path.dirname(paths[0]))
    result = eval(sidecar['load'], scope)  # load_state_dict's strict=True is its default
    assert not result.missing_keys and not result.unexpected_keys
    return scope['m']


def features(model: torch.nn.Module, size: int = SIZE, n: int = 6) -> torch.Tensor:
    """The evaluations' feature extraction (eval mode) over fixed random images."""
    gen = torch.Generator().manual_seed(0)
    data = [dict(inputs=torch.randn(3, size, size, generator=gen), data_samples=i % 2)
            for i in range(n)]
    return extract_features(model, data, batch_size=4, progress=False)[0]


@pytest.mark.parametrize('fmt', ['torchvision', 'safetensors'])
def test_trained_checkpoint_exports_the_evaluated_encoder(trained, fmt, tmp_path, monkeypatch):
    work, cfg = trained
    paths = export_run(work, fmt, str(tmp_path), results_dir=None)
    assert paths == [str(tmp_path / f'epoch_1_backbone{export.FORMATS[fmt]}'),
                     str(tmp_path / f'epoch_1_backbone{export.FORMATS[fmt]}.json')]
    sidecar = json.loads(open(paths[1]).read())
    assert (sidecar['arch'], sidecar['stem'], sidecar['feature_dim']) == ('resnet18', 'small', 512)
    assert 'm.maxpool = torch.nn.Identity()' in sidecar['build']
    model = loaded_export(paths, monkeypatch)
    reference = evaluated_backbone(monkeypatch, cfg, os.path.join(work, 'epoch_1.pth'))
    torch.testing.assert_close(features(model), features(reference), rtol=1e-6, atol=1e-6)
    assert features(model).shape == (6, 512)


def test_sidecar_holds_config_provenance_and_preprocessing(trained, tmp_path):
    work, cfg = trained
    checkpoint = os.path.join(work, 'epoch_1.pth')
    paths = export_run(checkpoint, 'safetensors', str(tmp_path), results_dir=None)
    sidecar = json.loads(open(paths[1]).read())
    meta = torch.load(checkpoint, weights_only=False)['meta']
    assert sidecar['config'] == dict(source='checkpoint meta', text=meta['cfg'])
    prov = sidecar['provenance']
    assert prov['checkpoint'] == os.path.abspath(checkpoint)
    assert prov['checkpoint_sha256'] == export.sha256_of(checkpoint)
    assert (prov['layout'], prov['method'], prov['backbone']) == ('mixco-bench', 'mixco',
                                                                  'resnet18')
    assert (prov['epoch'], prov['iter'], prov['seed'], prov['world_size']) == (1, 4, 0, 1)
    assert prov['training']['git_commit'] == meta['mmengine_version'][-40:]
    assert prov['exported']['versions']['torch'] == torch.__version__.split('+')[0]
    assert sidecar['weights_sha256'] == export.sha256_of(paths[0])
    # The test view of the evaluations, as torchvision transforms a user can type.
    transform = eval(sidecar['preprocess']['transform'], {'torchvision': torchvision})
    image = Image.fromarray((torch.rand(40, 30, 3) * 255).byte().numpy())
    assert torch.equal(transform(image), build_view('test', SIZE)(image))
    with safetensors.safe_open(paths[0], 'pt') as handle:
        assert handle.metadata()['build'] == sidecar['build']


def test_records_of_the_checkpoint_join_the_provenance(trained, tmp_path, monkeypatch):
    work, _ = trained
    checkpoint = os.path.join(work, 'epoch_1.pth')
    record = build_record(method='mixco', backbone='resnet18', pretrain_data='tiny-imagenet',
                          pretrain_epochs=1, eval_data='tiny-imagenet', seed=0, world_size=1,
                          total_batch=8, checkpoint=checkpoint,
                          protocols={'knn': dict(settings={}, metrics=dict(top1=50.0))})
    write_record(record, str(tmp_path / 'results'))
    out = tmp_path / 'out'
    paths = export_run(work, 'torchvision', str(out), results_dir=str(tmp_path / 'results'))
    found = json.loads(open(paths[1]).read())['provenance']['records']
    assert [r['id'] for r in found] == [record['id']] and found[0]['git'] == record['git']


@pytest.mark.parametrize('fmt', ['torchvision', 'safetensors'])
def test_random_encoder_is_the_one_eval_tool_evaluates(trained, fmt, tmp_path, monkeypatch):
    _, cfg = trained
    paths = export_backbone(RANDOM, fmt, str(tmp_path / 'r'), cfg, results_dir=None)
    sidecar = json.loads(open(paths[1]).read())
    assert sidecar['provenance']['method'] == 'random_init'
    assert sidecar['provenance']['checkpoint'] is None
    reference = evaluated_backbone(monkeypatch, cfg, 'random')
    torch.testing.assert_close(features(loaded_export(paths, monkeypatch)), features(reference),
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
    paths = export_backbone(str(path), 'safetensors', None, cfg, results_dir=None)
    assert paths[0] == str(tmp_path / f'{layout}_backbone.safetensors')
    sidecar = json.loads(open(paths[1]).read())
    assert sidecar['provenance']['layout'] == {'authors': 'moco-authors'}.get(layout, layout)
    assert sidecar['config']['source'].endswith(f'mixco_r{depth}_tiny.py')
    reference = evaluated_backbone(monkeypatch, cfg, str(path))
    torch.testing.assert_close(features(loaded_export(paths, monkeypatch), 32, 2),
                               features(reference, 32, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('depth', [18, 34, 50])
@pytest.mark.parametrize('small', [False, True])
def test_recipe_is_read_from_the_weights_and_builds_build_resnet(depth, small):
    state = build_resnet(depth, small).state_dict()
    assert resnet_recipe(state) == (depth, small)
    model = build_from_statement(build_statement(depth, small))
    model.load_state_dict(state, strict=True)
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
        export_backbone(resnet_checkpoint, 'torchvision', str(out), results_dir=None)
    assert sorted(os.listdir(out.parent)) == ['model.pth.json']
    assert (tmp_path / 'out' / 'model.pth.json').read_text() == 'mine'
    paths = export_backbone(resnet_checkpoint, 'torchvision', str(out), force=True,
                            results_dir=None)
    assert json.loads(open(paths[1]).read())['weights'] == 'model.pth'
    assert sorted(os.listdir(out.parent)) == ['model.pth', 'model.pth.json']


@pytest.mark.parametrize('case,words', [
    ('missing', ['nope.pth', 'not found']),
    ('no_backbone', ['unknown checkpoint layout']),
    ('not_resnet', ['not a torchvision ResNet']),
    ('format', ["'onnx' unknown", 'torchvision, safetensors']),
    ('random_without_config', ["'random' needs --config"]),
    ('config_mismatch', ['resnet50', 'holds resnet18']),
    ('empty_work_dir', ['holds no checkpoint']),
])
def test_bad_input_is_one_line_and_writes_nothing(case, words, resnet_checkpoint, tmp_path):
    out = tmp_path / 'out'
    bad = tmp_path / 'bad.pth'
    if case == 'no_backbone':
        torch.save({'state_dict': {'encoder.weight': torch.ones(1)}}, bad)
    if case == 'not_resnet':
        torch.save({'state_dict': {f'backbone.{k}': v
                                   for k, v in tiny_backbone().state_dict().items()}}, bad)
    source, fmt, config = str(bad), 'torchvision', None
    if case == 'missing':
        source = str(tmp_path / 'nope.pth')
    elif case == 'format':
        source, fmt = resnet_checkpoint, 'onnx'
    elif case == 'random_without_config':
        source = RANDOM
    elif case == 'config_mismatch':
        source, config = resnet_checkpoint, str(ROOT / 'configs/mixco_r50_tiny.py')
    elif case == 'empty_work_dir':
        source = str(out)
        out.mkdir()
    with pytest.raises((ValueError, OSError)) as err:
        export_run(source, fmt, str(out), config=config, results_dir=None)
    message = str(err.value)
    assert '\n' not in message and all(w in message for w in words), message
    assert not out.exists() or not os.listdir(out)


def test_safetensors_missing_names_the_pip_line(resnet_checkpoint, monkeypatch):
    monkeypatch.setitem(sys.modules, 'safetensors', None)  # import safetensors fails
    monkeypatch.setitem(sys.modules, 'safetensors.torch', None)
    with pytest.raises(ValueError, match='pip install safetensors'):
        export_run(resnet_checkpoint, 'safetensors', results_dir=None)
    assert os.listdir(os.path.dirname(resnet_checkpoint)) == ['epoch_2.pth']


def test_no_weights_stay_without_their_sidecar(resnet_checkpoint, monkeypatch):
    write = export.write_file

    def failing(path, data, force):
        if path.endswith('.json'):
            raise OSError('No space left on device')
        return write(path, data, force)
    monkeypatch.setattr(export, 'write_file', failing)
    with pytest.raises(OSError, match='No space'):
        export_run(resnet_checkpoint, 'torchvision', results_dir=None)
    assert os.listdir(os.path.dirname(resnet_checkpoint)) == ['epoch_2.pth']


def test_write_file_never_replaces_a_file_unless_forced(tmp_path):
    path = str(tmp_path / 'w.pth')
    export.write_file(path, b'first', force=False)
    with pytest.raises(FileExistsError):  # a file that appeared after the check stays
        export.write_file(path, b'second', force=False)
    assert open(path, 'rb').read() == b'first'
    export.write_file(path, b'third', force=True)
    assert open(path, 'rb').read() == b'third'
