"""Where an evaluation runs: `eval_device` turns a device string into a checked torch.device.

Feature extraction, kNN and the fast linear probe of `tools/eval.py` run on the device it
names; the evaluation at the end of training runs on the training device instead.
"""
from typing import Optional, Union

import torch

DEVICE_TYPES = ('cpu', 'cuda')


def default_device() -> torch.device:
    """'cuda' (the current CUDA device) when torch sees one, else 'cpu'."""
    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')


def parse_device(name: Union[str, torch.device]) -> torch.device:
    """The device `name` spells, if it is one the evaluation runs on ('cpu', 'cuda', 'cuda:N'),
    whether or not this machine has it (a suite checks its file where it is submitted).

    Raises:
        ValueError: One line, when the string is no device or names another type.
    """
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device {str(name)!r} is not a device; use 'cpu', 'cuda' or "
                         "'cuda:N'") from None
    if device.type not in DEVICE_TYPES:
        raise ValueError(f"device {str(name)!r}: evaluation runs on 'cpu', 'cuda' or 'cuda:N'")
    return device


def eval_device(name: Optional[Union[str, torch.device]] = None) -> torch.device:
    """The device `name` names, checked; None: `default_device()`.

    Args:
        name: 'cpu', 'cuda' or 'cuda:N' (a torch.device is accepted too).

    Returns:
        The torch.device.

    Raises:
        ValueError: One line, when the string is no device, names a type the evaluation does
            not run on, or a CUDA device torch cannot see.
    """
    if name is None:
        return default_device()
    device = parse_device(name)
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(f"device {str(name)!r}: torch sees no CUDA device here; use "
                             "'cpu'")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ValueError(f'device {str(name)!r}: torch sees {count} CUDA device(s), '
                             f'cuda:0 to cuda:{count - 1}')
    return device
