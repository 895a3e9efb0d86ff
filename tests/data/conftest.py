"""Fixtures of the data tests: small fake Tiny-ImageNet and CIFAR trees in the official formats."""
import pytest

from benchmark.data.fakes import make_fake_cifar, make_fake_tiny_imagenet


@pytest.fixture(scope='module')
def tiny(tmp_path_factory) -> str:
    return make_fake_tiny_imagenet(tmp_path_factory.mktemp('tiny'), num_classes=4,
                                   train_per_class=3, val_per_class=2, size=16)


@pytest.fixture(scope='module')
def cifar(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp('cifar')
    make_fake_cifar(root, 'cifar10', train_per_class=2, test_per_class=1)
    return make_fake_cifar(root, 'cifar100', train_per_class=1, test_per_class=1)
