"""Count what a piece of code asks of torch: every aten operation it dispatches (on a GPU, about
one kernel launch each) and the host reads among them, the operations whose result the host
needs before it can go on (on a GPU each one waits for the device to finish its queue).

A CPU proxy for a device's launches and synchronisations that runs anywhere: the operations are
the same on every device, so code that dispatches no host read on CPU tensors does not wait for
a GPU either (copies to the host that bypass the dispatcher, such as ``Tensor.tolist``, are not
seen: look for those in the source, or run the code under ``torch.cuda.set_sync_debug_mode``).
"""
from collections import Counter
from typing import Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
# Operations whose output the host must read: a value (item, bool, equal), or an output size
# that depends on the data (nonzero, masked_select, unique, a boolean index).
HOST_READS = frozenset({
    aten._local_scalar_dense.default, aten.is_nonzero.default, aten.equal.default,
    aten.nonzero.default, aten.nonzero.out, aten.nonzero_static.default,
    aten.masked_select.default, aten.argwhere.default, aten._unique.default,
    aten._unique2.default, aten.unique_dim.default, aten.unique_consecutive.default,
    aten.repeat_interleave.Tensor, aten.bincount.default})
INDEXING = frozenset({aten.index.Tensor, aten.index_put.default, aten.index_put_.default,
                      aten._index_put_impl_.default})


def boolean_index(func, args) -> bool:
    """An indexing operation with a boolean mask (its size comes from the mask's values)."""
    if func not in INDEXING or len(args) < 2:
        return False
    indices: Iterable = args[1] or ()
    return any(torch.is_tensor(i) and i.dtype == torch.bool for i in indices)


class DispatchCount(TorchDispatchMode):
    """``with DispatchCount() as count: ...``; then ``count.ops`` (all aten operations),
    ``count.host_reads`` (a Counter of the host reads by name) and ``count.by_name``."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self.by_name: Counter = Counter()
        self.host_reads: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        name = str(func)
        self.by_name[name] += 1
        if func in HOST_READS or boolean_index(func, args):
            self.host_reads[name] += 1
        return func(*args, **(kwargs or {}))
