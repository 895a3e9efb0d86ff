"""Float32 islands inside mixed-precision training.

Under bfloat16/float16 autocast the encoders run in low precision, but the contrastive logits
must not: they are cosine similarities divided by a small temperature (x 20 for tau_mix = 0.05),
so bfloat16's 8-bit mantissa would put an error of ~0.1 on each logit, and on the CPU autocast
even runs log_softmax in bfloat16. Casting to float32 is not enough on its own, because autocast
casts a matmul's float32 inputs back down; the ops must also run with autocast switched off.
"""
from typing import ContextManager

import torch
from torch import Tensor


def float32_region(like: Tensor) -> ContextManager:
    """Autocast off on `like`'s device type: ops inside run in their inputs' dtypes.

    Args:
        like: Any tensor on the device the enclosed ops run on.

    Returns:
        A context manager; cast the inputs with `.float()` inside it.
    """
    return torch.autocast(device_type=like.device.type, enabled=False)


def at_least_float32(x: Tensor) -> Tensor:
    """`x` in float32 if it is in a lower floating precision (bfloat16, float16), else as is.

    Args:
        x: Any tensor; float64 stays float64 (tests compare against float64 references).

    Returns:
        Same shape and values (up to the cast).
    """
    low = x.is_floating_point() and torch.finfo(x.dtype).bits < 32
    return x.float() if low else x
