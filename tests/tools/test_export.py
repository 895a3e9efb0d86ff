"""tools/export.py: a checkpoint's encoder to a file torchvision's ResNet loads strictly, with its
sidecar; bad input is one ``error:`` line before anything is written. In-process."""
import json
import os

import pytest
import torch
import torchvision
from safetensors.torch import load_file

from benchmark.data.scan import TO_RGB_RULE
from methods.backbones import build_resnet
from tools import export as export_tool


@pytest.fixture
def checkpoint(tmp_path) -> str:
    """One of our checkpoints without the config text in its meta (so --config is read)."""
    path = tmp_path / 'epoch_3.pth'
    state = {f'backbone.{k}': v for k, v in build_resnet(18).state_dict().items()}
    torch.save({'state_dict': state,
                'meta': {'epoch': 3, 'iter': 30}}, path)
    return str(path)


def test_export_writes_weights_torchvision_loads_strictly(checkpoint, tmp_path, run_main):
    out = tmp_path / 'exported' / 'r18.safetensors'
    code, stdout, err, _ = run_main(export_tool, checkpoint, '--format', 'safetensors', '--out',
                                    out, '--config', 'configs/mixco_r18_tiny.py')
    assert code == 0, err[-2000:]
    assert stdout.splitlines() == [f'weights: {out}', f'sidecar: {out}.json']
    model = torchvision.models.resnet18()
    model.fc = torch.nn.Identity()
    model.load_state_dict(load_file(str(out)), strict=True)
    sidecar = json.loads((tmp_path / 'exported' / 'r18.safetensors.json').read_text())
    assert sidecar['build'] == 'm = torchvision.models.resnet18(); m.fc = torch.nn.Identity()'
    assert sidecar['stem'] == 'imagenet' and len(sidecar['checkpoint_sha256']) == 64
    assert sidecar['normalize'] == dict(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    assert (sidecar['data'], sidecar['input_size'], sidecar['resize'], sidecar['center_crop'],
            sidecar['grey_to_rgb']) == ('tiny-imagenet', 224, 256, 224, TO_RGB_RULE)


def test_random_takes_the_seed_and_input_size_of_cfg_options(tmp_path, run_main):
    code, _, err, _ = run_main(export_tool, 'random', '--format', 'torchvision', '--out',
                               tmp_path / 'r.pth', '--config', 'configs/mixco_r18_digits.py',
                               '--cfg-options', 'randomness.seed=7',
                               'train_dataloader.dataset.input_size=24')
    assert code == 0, err[-2000:]
    sidecar = json.loads((tmp_path / 'r.pth.json').read_text())
    assert (sidecar['data'], sidecar['input_size'], sidecar['resize']) == ('digits', 24, 27)
    assert sidecar['transform'].startswith('torchvision.transforms.Compose([torchvision.'
                                           'transforms.Grayscale(num_output_channels=3), ')
    torch.manual_seed(7)
    expected = build_resnet(18).state_dict()
    exported = torch.load(tmp_path / 'r.pth', weights_only=True)
    assert list(exported) == list(expected)
    assert all(torch.equal(exported[k], v) for k, v in expected.items())


@pytest.mark.parametrize('case,words', [
    ('missing', ['nope.pth', 'not found']),
    ('format', ['--format', "'onnx'"]),
    ('exists', ['epoch_3_backbone.pth exists already', '--force']),
    ('random', ["'random' needs --config"]),
    ('options', ['--cfg-options needs --config']),
    ('no_config', ['epoch_3.pth holds no config', '--config']),
    ('no_backbone', ['bad.pth', 'unknown checkpoint layout']),
    ('truncated', ['bad.pth', 'truncated or corrupt']),
    ('config', ['epoch_3.pth', 'does not fit the backbone', '(depth, small_stem)']),
])
def test_bad_input_is_one_error_line(case, words, checkpoint, tmp_path, one_error_line):
    bad = tmp_path / 'bad.pth'
    args = [checkpoint, '--format', 'torchvision']
    if case not in ('random', 'options', 'no_config', 'config'):
        args += ['--config', 'configs/mixco_r18_tiny.py']
    if case == 'missing':
        args[0] = tmp_path / 'nope.pth'
    elif case == 'format':
        args[2] = 'onnx'
    elif case == 'exists':
        (tmp_path / 'epoch_3_backbone.pth').write_bytes(b'')
    elif case == 'random':
        args[0] = 'random'
    elif case == 'options':
        args += ['--cfg-options', 'randomness.seed=1']
    elif case == 'no_backbone':
        torch.save({'state_dict': {'head.weight': torch.ones(1)}}, bad)
        args[0] = bad
    elif case == 'truncated':
        bad.write_bytes(open(checkpoint, 'rb').read()[:1000])
        args[0] = bad
    elif case == 'config':
        args += ['--config', 'configs/mixco_r34_tiny.py']
    before = sorted(os.listdir(tmp_path))
    one_error_line(export_tool, *args, words=words)
    assert sorted(os.listdir(tmp_path)) == before
