"""Backbones load strictly from our, the MixCo/MoCo authors' and torchvision's checkpoints."""
import os

import pytest
import torch
from torchvision.models import resnet18

from benchmark.engine.checkpoints import (CheckpointError, CheckpointMismatchError, load_backbone,
                                          loadable, read_checkpoint)
from methods import MoCo, build_resnet


def equal_weights(a: torch.nn.Module, b_state: dict, prefix: str = '') -> bool:
    return all(torch.equal(v, b_state[prefix + k]) for k, v in a.state_dict().items())


def test_our_checkpoint(tmp_path):
    """state_dict with backbone.* (and the momentum encoder beside it) loads the query backbone."""
    model = MoCo(backbone=dict(depth=18), queue_size=16)
    torch.save({'state_dict': model.state_dict(), 'meta': {'epoch': 3}}, tmp_path / 'ours.pth')
    net = build_resnet(18)
    assert load_backbone(net, str(tmp_path / 'ours.pth')) == 'mixco-bench'
    assert equal_weights(net, model.state_dict(), 'backbone.')


def test_authors_checkpoint(tmp_path):
    """The authors' MoCo/MixCo layout: module.encoder_q.* with the MLP head under fc.*."""
    source = resnet18()
    state = {f'module.encoder_q.{k}': v for k, v in source.state_dict().items() if not k.startswith('fc.')}
    state.update({'module.encoder_q.fc.0.weight': torch.randn(512, 512),
                  'module.encoder_q.fc.2.weight': torch.randn(128, 512),
                  'module.encoder_k.conv1.weight': torch.randn(64, 3, 7, 7),
                  'module.queue': torch.randn(128, 4096)})
    torch.save({'epoch': 200, 'arch': 'resnet18', 'state_dict': state,
                'optimizer': torch.optim.SGD(source.parameters(), lr=0.1).state_dict()},
               tmp_path / 'authors.pth.tar')
    net = build_resnet(18)
    assert load_backbone(net, str(tmp_path / 'authors.pth.tar')) == 'moco-authors'
    assert equal_weights(net, source.state_dict())


def test_torchvision_state_dict(tmp_path):
    """A plain torchvision ResNet state dict (classifier dropped)."""
    source = resnet18()
    torch.save(source.state_dict(), tmp_path / 'tv.pth')
    net = build_resnet(18)
    assert load_backbone(net, str(tmp_path / 'tv.pth')) == 'torchvision'
    assert equal_weights(net, source.state_dict())


def test_wrong_architecture_names_counts_and_first_shape(tmp_path):
    """R18 weights into an R50 backbone: counts of missing/unexpected keys in one message."""
    torch.save(resnet18().state_dict(), tmp_path / 'tv.pth')
    with pytest.raises(CheckpointMismatchError, match=r'\d+ missing keys .*\d+ unexpected keys'):
        load_backbone(build_resnet(50), str(tmp_path / 'tv.pth'))


def test_wrong_stem_reports_first_shape_mismatch(tmp_path):
    """An ImageNet-stem checkpoint into a small-stem backbone names conv1's shapes."""
    torch.save(resnet18().state_dict(), tmp_path / 'tv.pth')
    with pytest.raises(CheckpointMismatchError, match=r'conv1.weight: checkpoint \(64, 3, 7, 7\)'):
        load_backbone(build_resnet(18, small_stem=True), str(tmp_path / 'tv.pth'))


def test_unknown_layout(tmp_path):
    torch.save({'state_dict': {'encoder.weight': torch.ones(1)}}, tmp_path / 'x.pth')
    with pytest.raises(CheckpointMismatchError, match='unknown checkpoint layout'):
        load_backbone(build_resnet(18), str(tmp_path / 'x.pth'))


# --- every way a checkpoint file can be bad is one CheckpointError line ----------------------

BAD_REASONS = {
    'truncated': 'truncated or corrupt (',
    'empty': 'is empty; copy it again or pick another',
    'text': 'not a torch checkpoint (',
    'forbidden': 'refusing to load: it asks for posix.system; only weights are loaded',
    'plain_pickle': 'not a torch checkpoint (its pickle is not plain weights',
    'folder': 'is a folder; pass a .pth file inside it',
}


@pytest.mark.parametrize('kind', sorted(BAD_REASONS))
def test_bad_checkpoint_files_are_one_line_naming_the_file(kind, bad_checkpoints):
    path = bad_checkpoints[kind]
    with pytest.raises(CheckpointError) as err:
        read_checkpoint(path)
    message = str(err.value)
    assert '\n' not in message and message.startswith(f'checkpoint {path}: '), message
    assert BAD_REASONS[kind] in message, message
    assert loadable(path).startswith(BAD_REASONS[kind].split(' (')[0])
    with pytest.raises(CheckpointError, match=f'^checkpoint {path}: '):
        load_backbone(build_resnet(18), path)
    assert not os.path.exists(bad_checkpoints['marker'])  # the pickle's os.system never ran


class Foreign:
    """A class no weights-only checkpoint may name."""


def test_forbidden_global_is_named_whatever_it_is(tmp_path):
    torch.save({'state_dict': {}, 'meta': Foreign()}, tmp_path / 'foreign.pth')
    with pytest.raises(CheckpointError,
                       match=r'it asks for [\w.]*test_checkpoints\.Foreign; only weights'):
        read_checkpoint(str(tmp_path / 'foreign.pth'))


def test_missing_file_and_mismatch_name_the_file(tmp_path):
    with pytest.raises(CheckpointError, match=f'^checkpoint {tmp_path}/nope.pth: not found$'):
        read_checkpoint(str(tmp_path / 'nope.pth'))
    torch.save(resnet18().state_dict(), tmp_path / 'r18.pth')
    with pytest.raises(CheckpointMismatchError) as err:
        load_backbone(build_resnet(50), str(tmp_path / 'r18.pth'))
    assert str(err.value).startswith(f'checkpoint {tmp_path}/r18.pth: checkpoint does not fit')
    assert isinstance(err.value, CheckpointError) and isinstance(err.value, ValueError)
    assert err.value.reason.startswith('checkpoint does not fit the backbone')


def test_good_checkpoint_reads_and_is_loadable(bad_checkpoints):
    good = bad_checkpoints['truncated'].replace('truncated.pth', 'good.pth')
    assert set(read_checkpoint(good)) == {'state_dict', 'meta'} and loadable(good) is None


def test_resume_checkpoint_must_fit_the_whole_model(tmp_path):
    """--resume: every tensor of the model in its shape, or one line before the data is built."""
    from benchmark.engine.checkpoints import check_resume_fits
    model = MoCo(backbone=dict(depth=18), queue_size=16)
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, tmp_path / 'ours.pth')
    check_resume_fits(model, str(tmp_path / 'ours.pth'))
    other = MoCo(backbone=dict(depth=18), queue_size=32)
    with pytest.raises(CheckpointMismatchError) as err:
        check_resume_fits(other, str(tmp_path / 'ours.pth'))
    assert str(err.value) == (
        f'checkpoint {tmp_path}/ours.pth: checkpoint does not fit the model: 0 missing keys [], '
        "0 unexpected keys []; first shape mismatch queue: checkpoint (16, 128) vs model "
        "(32, 128); check the config (depth, small_stem) matches the checkpoint")
