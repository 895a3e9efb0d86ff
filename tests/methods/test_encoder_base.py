"""EncoderModel: mmengine's forward modes dispatch to the backbone or the method's loss."""
import pytest
import torch

from methods.base import EncoderModel


class _Fixed(EncoderModel):
    """A method whose loss is the mean of the features, to see what forward(mode='loss') calls."""

    def loss(self, inputs, data_samples=None):
        return dict(loss_mean=self.backbone(inputs).mean(), got=data_samples)


def _model(cls=EncoderModel):
    torch.manual_seed(0)
    return cls(backbone=dict(depth=18, small_stem=True)).eval()


def test_backbone_keywords_reach_build_resnet():
    model = _model()
    assert model.backbone.feature_dim == 512
    assert model.backbone.conv1.kernel_size == (3, 3)  # small_stem=True got through
    default = EncoderModel()
    assert default.backbone.conv1.kernel_size == (7, 7)  # the default: ImageNet stem


@pytest.mark.parametrize('mode', ['tensor', 'predict'])
def test_tensor_and_predict_return_backbone_features(mode):
    model = _model()
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model.backbone(x)
        torch.testing.assert_close(model(x, mode=mode), expected, rtol=0, atol=0)
        # a list of views (what the contrastive loaders give): the first view's features
        torch.testing.assert_close(model([x, x.flip(0)], mode=mode), expected, rtol=0, atol=0)
        torch.testing.assert_close(model((x.flip(0),), mode=mode), expected.flip(0),
                                   rtol=0, atol=0)


def test_loss_mode_calls_the_methods_loss_with_the_labels():
    model = _model(_Fixed)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model(x, data_samples='labels', mode='loss')
        assert out['got'] == 'labels'
        assert out['loss_mean'].item() == pytest.approx(model.backbone(x).mean().item(), abs=0)


def test_base_loss_is_abstract_and_bad_mode_is_one_line():
    model = _model()
    x = torch.zeros(2, 3, 8, 8)
    with pytest.raises(NotImplementedError):
        model(x, mode='loss')
    with pytest.raises(RuntimeError,
                       match=r"^invalid mode 'train'; expected loss, tensor or predict$"):
        model(x, mode='train')
