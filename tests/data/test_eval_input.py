"""What the evaluations feed an encoder, as data and as one torchvision expression: the
expression, evaluated with torch and torchvision alone, turns each kind of data's own images
(digits' grey arrays, CIFAR's arrays, image files read as RGB) into exactly the tensors the
dataset hands the evaluations; the data fields are the view's; the input size is the config's,
else the dataset's default, as the evaluations read it; a step without an expression is one line."""
import pytest
import torch
import torchvision
from lightly.transforms.utils import IMAGENET_NORMALIZE
from mmengine.config import Config
from PIL import Image
from torchvision import transforms as T

from benchmark.data.arrays import CIFAR10, Digits
from benchmark.data.base import load_rgb
from benchmark.data.eval_input import (EVAL_VIEW, describe_steps, eval_dataset_cfg, eval_input,
                                       input_size_of)
from benchmark.data.image_files import TinyImageNet
from benchmark.data.scan import TO_RGB_RULE


def transform_of(description: dict):
    return eval(description['transform'], {'torch': torch, 'torchvision': torchvision})


@pytest.mark.parametrize('size', [16, 37])
def test_digits_grey_arrays_become_the_evaluated_inputs(size):
    dataset = Digits(split='val', input_size=size, view=EVAL_VIEW)
    description = eval_input(dict(type='Digits', input_size=size))
    transform = transform_of(description)
    for index in range(3):
        grey = Image.fromarray(dataset.images[index])  # mode L: the data as it is
        assert torch.equal(transform(grey), dataset[index]['inputs'])
    resize = round(size / 0.875)
    assert {k: v for k, v in description.items() if k != 'transform'} == dict(
        input_size=size, grey_to_rgb='torchvision.transforms.Grayscale(num_output_channels=3)',
        resize=resize, interpolation='bilinear', antialias=True, center_crop=size,
        normalize=dict(mean=IMAGENET_NORMALIZE['mean'], std=IMAGENET_NORMALIZE['std']))


def test_rgb_arrays_and_image_files_become_the_evaluated_inputs(cifar, tiny):
    arrays = CIFAR10(cifar, split='val', input_size=24, view=EVAL_VIEW)
    description = eval_input(dict(type='CIFAR10', input_size=24))
    assert description['grey_to_rgb'] is None and description['resize'] == 27
    assert torch.equal(transform_of(description)(Image.fromarray(arrays.data[0])),
                       arrays[0]['inputs'])
    files = TinyImageNet(tiny, split='val', input_size=12, view=EVAL_VIEW)
    description = eval_input(dict(type='TinyImageNet', input_size=12))
    assert description['grey_to_rgb'] == TO_RGB_RULE
    assert torch.equal(transform_of(description)(load_rgb(files.samples[1][0])),
                       files[1]['inputs'])


def test_input_size_is_the_configs_else_the_datasets_default():
    cfg = Config(dict(train_dataloader=dict(dataset=dict(type='CIFAR10', data_root='x'))))
    assert input_size_of(cfg.train_dataloader.dataset) == 224 == eval_dataset_cfg(cfg)[
        'input_size'] == eval_input(dict(type='CIFAR10'))['input_size']
    assert eval_input(dict(type='CIFAR10'))['resize'] == 256
    cfg.train_dataloader.dataset.input_size = 20
    assert eval_dataset_cfg(cfg)['input_size'] == 20 == input_size_of(cfg.train_dataloader.dataset)


def test_a_step_without_an_expression_or_an_unknown_dataset_is_one_line():
    with pytest.raises(ValueError, match=r'^evaluation view step RandomHorizontalFlip has no '
                                         r'torchvision expression; add it to STEPS in \S+$'):
        describe_steps([T.ToTensor(), T.RandomHorizontalFlip()])
    with pytest.raises(ValueError, match=r"^dataset type 'Nope' is not registered; name one"):
        eval_input(dict(type='Nope', input_size=16))
