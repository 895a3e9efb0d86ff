"""Data: datasets, views, the resumable sampler, the image pre-flight check, fakes.

Importing the package registers every dataset and the sampler in mmengine's registries.
"""
from benchmark.data.arrays import CIFAR10, CIFAR100, Digits
from benchmark.data.base import BadImageError, DataRootError
from benchmark.data.image_files import ImageFolderDataset, ImageNet, TinyImageNet
from benchmark.data.sampler import ResumableSampler, SampleKey

__all__ = ['CIFAR10', 'CIFAR100', 'Digits', 'BadImageError', 'DataRootError',
           'ImageFolderDataset', 'ImageNet', 'TinyImageNet', 'ResumableSampler', 'SampleKey']
