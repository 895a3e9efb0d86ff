"""EncoderModel's share of each training iteration: parse_losses (mmengine's values and
gradients, with less device work) and the default data preprocessor (a copy that does not wait)."""
import torch
from mmengine.model import BaseModel

from methods.base import EncoderModel


def _terms(x):
    return dict(loss_inst=(x ** 2).sum(), acc_inst=(x > 0).float().mean(),
                loss_mix=x.abs().mean() * 0.5, loss_parts=[x.sum(), x.mean()],
                per_sample=x * 3)


def test_values_and_gradients_equal_mmengines():
    x = torch.randn(7, dtype=torch.float32)
    ours_x, theirs_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours_loss, ours_vars = EncoderModel.parse_losses(None, _terms(ours_x))
    theirs_loss, theirs_vars = BaseModel.parse_losses(None, _terms(theirs_x))
    assert list(ours_vars) == list(theirs_vars) == ['loss', 'loss_inst', 'acc_inst', 'loss_mix',
                                                   'loss_parts', 'per_sample']
    for name in ours_vars:
        assert torch.equal(ours_vars[name], theirs_vars[name]), name
    ours_loss.backward()
    theirs_loss.backward()
    assert torch.equal(ours_loss, theirs_loss) and torch.equal(ours_x.grad, theirs_x.grad)


def test_a_scalar_term_is_logged_as_it_is():
    loss = torch.tensor(2.5, requires_grad=True)
    total, log_vars = EncoderModel.parse_losses(None, dict(loss_inst=loss))
    assert total is loss and log_vars['loss_inst'] is loss


def test_the_default_preprocessor_copies_without_waiting(monkeypatch):
    """Without a data_preprocessor config the batch goes to the device with non_blocking=True
    (mmengine's default copy makes the host wait for the GPU)."""
    class Model(EncoderModel):
        def __init__(self):
            super().__init__(backbone=dict(depth=18))

    seen = []
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        seen.append(kwargs.get('non_blocking'))
        return real_to(self, *args, **kwargs)

    model = Model()
    monkeypatch.setattr(torch.Tensor, 'to', to)
    model.data_preprocessor(dict(inputs=[torch.zeros(2, 3, 4, 4)] * 2,
                                 data_samples=torch.zeros(2)), True)
    assert seen == [True, True, True]
