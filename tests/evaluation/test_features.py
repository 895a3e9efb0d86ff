"""Feature extraction: eval mode, dataset order, and two processes equal one."""
import pytest
import torch
from torch import nn

from benchmark.evaluation.features import extract_features


class TensorDataset(torch.utils.data.Dataset):
    def __init__(self, n: int = 11):
        gen = torch.Generator().manual_seed(0)
        self.images = torch.randn(n, 3, 4, 4, generator=gen)
        self.labels = torch.arange(n) % 3

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return dict(inputs=self.images[i], data_samples=int(self.labels[i]))


def backbone() -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 5, 3), nn.BatchNorm2d(5), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten())
    net[1].running_mean.uniform_(-1, 1)  # eval-mode BN then differs visibly from train mode
    return net


def test_features_in_order_eval_mode_and_mode_restored():
    """Features equal the eval-mode forward of each sample alone, in order; train mode is back."""
    net, data = backbone(), TensorDataset()
    feats, labels = extract_features(net, data, batch_size=4, progress=False)
    assert net.training
    net.eval()
    expected = torch.cat([net(data.images[i:i + 1]) for i in range(len(data))])
    torch.testing.assert_close(feats, expected)
    assert torch.equal(labels, data.labels)


def on_each_process(rank: int, world: int) -> tuple:
    """In the shared gloo pair (tests/methods/gloo_pair.py): this process's features."""
    return extract_features(backbone(), TensorDataset(), batch_size=2, progress=False)


@pytest.mark.slow
def test_two_processes_gather_the_same_features(two_process_results):
    """Each process extracts a shard; both end with all 11 rows in dataset order."""
    feats, labels = extract_features(backbone(), TensorDataset(), batch_size=4, progress=False)
    for got_feats, got_labels in two_process_results['tests.evaluation.test_features']:
        torch.testing.assert_close(got_feats, feats)
        assert torch.equal(got_labels, labels)


class _Stream:
    """A stdout stand-in, a terminal or not."""

    def __init__(self, tty: bool):
        self.tty, self.text = tty, ''

    def isatty(self):
        return self.tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def test_progress_bar_on_a_terminal_only_and_ended_by_a_newline(monkeypatch):
    """A log file gets no bar (its carriage-return redraws would pile up on one line); a
    terminal gets one whose last line is closed, so the next print starts on its own line."""
    for tty in (False, True):
        stream = _Stream(tty)
        monkeypatch.setattr('sys.stdout', stream)
        extract_features(backbone(), TensorDataset(), batch_size=4, progress=True)
        monkeypatch.undo()
        if tty:
            assert '11/11' in stream.text and stream.text.endswith('\n')
        else:
            assert stream.text == ''
