"""Workarounds for mmengine 0.10.7 on current torch, each pinned to its cause, in one place."""
import datetime
import os
import pickle
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.distributed as torch_dist
from mmengine.device import (get_device, is_cuda_available, is_mlu_available, is_musa_available,
                             is_npu_available)
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS


_NUMPY_CORE = getattr(np, '_core', None) or np.core  # numpy 2 renamed numpy.core
_DTYPES = ('float64', 'float32', 'float16', 'int64', 'int32', 'int16', 'int8', 'uint8', 'bool')


def history_buffer_statistic(owner: Any, name: str) -> Any:
    """Stand-in for `getattr` in mmengine checkpoints: only HistoryBuffer's statistic methods.

    A HistoryBuffer pickles its statistics table as `getattr(HistoryBuffer, 'mean')` and so on;
    any other attribute look-up in a checkpoint is refused.
    """
    from mmengine.logging.history_buffer import HistoryBuffer
    allowed = {'min', 'max', 'current', 'mean', *HistoryBuffer._statistics_methods}
    if owner is HistoryBuffer and name in allowed:
        return getattr(owner, name)
    raise pickle.UnpicklingError(
        f'checkpoint asks for getattr({getattr(owner, "__name__", owner)!r}, {name!r}), which '
        'an mmengine checkpoint never does; refusing to load it')


def mmengine_checkpoint_globals() -> list:
    """The non-tensor globals an mmengine checkpoint pickles (message hub logs, numpy values)."""
    from mmengine.logging.history_buffer import HistoryBuffer
    return [HistoryBuffer, (history_buffer_statistic, 'builtins.getattr'),
            np.ndarray, np.dtype, *[type(np.dtype(t)) for t in _DTYPES],
            _NUMPY_CORE.multiarray._reconstruct, _NUMPY_CORE.multiarray.scalar]


def allow_mmengine_checkpoints() -> None:
    """Let `torch.load(weights_only=True)` read mmengine's own checkpoints.

    open-mmlab/mmengine#1655: torch >= 2.6 loads with weights_only=True by default and mmengine
    0.10.7 calls `torch.load` without arguments, so `--resume` fails on its own checkpoints. We
    keep weights_only=True (loading never runs code) and allow-list only what mmengine writes; a
    checkpoint asking for anything else is refused by torch's weights-only unpickler.
    """
    torch.serialization.add_safe_globals(mmengine_checkpoint_globals())


# The update of mmengine 0.10.7's HistoryBuffer (mmengine/logging/history_buffer.py):
# `np.append` of the value and of its count, so every update copies the whole history (up to
# `max_length`, one million values), and a log history's cost per update grew with the run.
MMENGINE_HISTORY_UPDATE = HistoryBuffer.update
MMENGINE_HISTORY_GETSTATE = HistoryBuffer.__getstate__
_STORE = '_amortized_store'  # not pickled: checkpoints keep mmengine's format


class _HistoryStore:
    """Room for a HistoryBuffer's values and counts beyond the ones it holds."""

    def __init__(self, logs: np.ndarray, counts: np.ndarray, log_dtype, count_dtype,
                 max_length: int) -> None:
        n = len(logs)
        size = max(64, min(2 * (n + 1), 2 * max_length), n + 1)
        self.logs = np.empty(size, log_dtype)
        self.counts = np.empty(size, count_dtype)
        self.logs[:n], self.counts[:n] = logs, counts
        self.start, self.end = 0, n
        self.views = (None, None)


def amortized_history_update(self, log_val: Union[int, float], count: int = 1) -> None:
    """HistoryBuffer.update at a constant cost: the values go into arrays with spare room
    (doubled when full, the last `max_length` values moved to a new one at that size), and
    `_log_history`/`_count_history` are views of them. Values, dtypes, trimming and every
    statistic are mmengine's; views handed out earlier keep their values."""
    if not isinstance(log_val, (int, float)) or not isinstance(count, (int, float)):
        MMENGINE_HISTORY_UPDATE(self, log_val, count)  # mmengine's TypeError
        return
    logs, counts = self._log_history, self._count_history
    log_dtype = np.promote_types(logs.dtype, np.asarray(log_val).dtype)  # as np.append
    count_dtype = np.promote_types(counts.dtype, np.asarray(count).dtype)
    store = self.__dict__.get(_STORE)
    if (store is None or store.views[0] is not logs or store.views[1] is not counts
            or store.logs.dtype != log_dtype or store.counts.dtype != count_dtype
            or store.end == len(store.logs)):
        store = _HistoryStore(logs, counts, log_dtype, count_dtype, self.max_length)
        self.__dict__[_STORE] = store
    store.logs[store.end], store.counts[store.end] = log_val, count
    store.end += 1
    store.start = max(store.start, store.end - self.max_length)
    self._log_history = store.logs[store.start:store.end]
    self._count_history = store.counts[store.start:store.end]
    store.views = (self._log_history, self._count_history)


def history_getstate(self) -> dict:
    """mmengine's state of a HistoryBuffer, without the spare room."""
    state = dict(MMENGINE_HISTORY_GETSTATE(self))
    state.pop(_STORE, None)
    return state


def amortize_history_buffer() -> None:
    """Give mmengine's HistoryBuffer (every scalar of the message hub: losses, time, learning
    rates) a constant cost per update; mmengine's copied the whole history each time, so an
    update cost more the longer the run (docs/upstream-fixes.md has the numbers). Idempotent."""
    HistoryBuffer.update = amortized_history_update
    HistoryBuffer.__getstate__ = history_getstate


amortize_history_buffer()


# Seconds a collective (all-reduce, broadcast, barrier) waits for a missing process before the
# job fails: env_cfg.dist_cfg.timeout, for gloo and NCCL alike.
DIST_TIMEOUT_S = 1800


def dist_timeout(cfg: Any) -> int:
    """Set env_cfg.dist_cfg.timeout to DIST_TIMEOUT_S unless the config sets it; its value.

    mmengine's `init_dist` (the GPU path, NCCL) passes dist_cfg to `init_process_group`, so the
    key reaches NCCL there; `setup_cpu_distributed` passes it to gloo. Without this default NCCL
    would keep torch's own (10 minutes for NCCL in current torch, 30 for gloo).

    Raises:
        ValueError: A timeout that is not a positive number of seconds.
    """
    if cfg.get('env_cfg') is None:
        cfg.env_cfg = {}
    if cfg.env_cfg.get('dist_cfg') is None:
        cfg.env_cfg.dist_cfg = {}
    dist_cfg = cfg.env_cfg.dist_cfg
    timeout = dist_cfg.setdefault('timeout', DIST_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f'env_cfg.dist_cfg.timeout must be a positive number of seconds, '
                         f'got {timeout!r}')
    return timeout


def setup_cpu_distributed(cfg: Any, launcher: str) -> None:
    """Give every distributed launch the collective timeout of the config (`dist_timeout`),
    and make a torchrun launch work without GPUs; leave the rest of the GPU path (NCCL) to
    mmengine.

    mmengine 0.10.7 under torchrun calls `torch.cuda.set_device` (fails without a GPU), wraps
    the model in DDP with `device_ids=[LOCAL_RANK]` (ValueError for CPU modules) and defaults to
    NCCL. Without CUDA we start the process group ourselves with gloo (mmengine then skips its
    own init) and build DDP with `device_ids=None`.
    """
    if launcher == 'none':
        return
    seconds = dist_timeout(cfg)
    if torch.cuda.is_available():
        return  # mmengine's init_dist gets dist_cfg, the timeout included
    if launcher != 'pytorch':
        raise ValueError(f'--launcher {launcher} needs GPUs; without GPUs use '
                         'tools/dist_train.sh (torchrun, --launcher pytorch)')
    dist_cfg = cfg.env_cfg.dist_cfg
    dist_cfg['backend'] = 'gloo'
    timeout = datetime.timedelta(seconds=seconds)
    if not torch_dist.is_initialized():
        torch_dist.init_process_group(backend='gloo', timeout=timeout,
                                      rank=int(os.environ['RANK']),
                                      world_size=int(os.environ['WORLD_SIZE']))
    wrapper = dict(cfg.get('model_wrapper_cfg') or {})
    wrapper.setdefault('type', 'MMDistributedDataParallel')
    wrapper.setdefault('broadcast_buffers', False)
    wrapper['device_ids'] = None
    cfg.model_wrapper_cfg = wrapper


@OPTIM_WRAPPERS.register_module()
class CPUCapableAmpOptimWrapper(AmpOptimWrapper):
    """mmengine's AmpOptimWrapper that also trains in bfloat16 on a machine without accelerator.

    mmengine 0.10.7's `AmpOptimWrapper.__init__` asserts a GPU/NPU/MLU/MUSA ("only available
    training on gpu, npu, mlu or musa"), although torch autocasts bfloat16 on the CPU and
    mmengine's own `runner.amp.autocast` (which `optim_context` enters) handles device 'cpu'
    with bfloat16. With an accelerator this class is `AmpOptimWrapper` unchanged. On the CPU:
    dtype must be bfloat16 (mmengine's CPU autocast accepts no other) and loss scaling is off
    whatever `loss_scale` says: bfloat16 has float32's exponent range, so gradients do not
    underflow (and mmengine's scaler is CUDA's GradScaler, which disables itself without CUDA).

    Args:
        loss_scale: As AmpOptimWrapper (GPU only); `dict(enabled=False)` turns scaling off,
            which bfloat16 does not need and which saves GradScaler's inf check each step.
        dtype: 'bfloat16' (the only choice on the CPU), 'float16', ... as AmpOptimWrapper.
        use_fsdp: As AmpOptimWrapper.
        **kwargs: Arguments of OptimWrapper (optimizer, accumulative_counts, clip_grad).
    """

    def __init__(self,
                 loss_scale: Union[str, float, dict] = 'dynamic',
                 dtype: Optional[Union[str, torch.dtype]] = None,
                 use_fsdp: bool = False,
                 **kwargs) -> None:
        accelerator = (is_cuda_available() or is_npu_available() or is_mlu_available()
                       or is_musa_available())
        if accelerator or get_device() != 'cpu':  # mps etc.: mmengine's own answer
            super().__init__(loss_scale=loss_scale, dtype=dtype, use_fsdp=use_fsdp, **kwargs)
            return
        if dtype not in ('bfloat16', torch.bfloat16):
            raise ValueError(f"optim_wrapper.dtype={dtype!r}: without a GPU only 'bfloat16' "
                             "autocasts (CPU); set dtype='bfloat16' or use type='OptimWrapper'")
        OptimWrapper.__init__(self, **kwargs)  # skips AmpOptimWrapper's accelerator assert
        self._scale_update_param = None
        self.loss_scaler = torch.amp.GradScaler('cpu', enabled=False)  # identity
        self.cast_dtype = torch.bfloat16
