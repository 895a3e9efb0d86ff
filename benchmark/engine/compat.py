"""Workarounds for mmengine 0.10 on current torch, each pinned to its cause, in one place, and
every use of mmengine's private names (`PRIVATE_API`)."""
import datetime
import importlib
import inspect
import os
import pickle
import re
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch
import torch.distributed as torch_dist
from mmengine.config import DictAction
from mmengine.device import (get_device, is_cuda_available, is_mlu_available, is_musa_available,
                             is_npu_available)
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS

from benchmark import dist


class PrivateName(NamedTuple):
    """A name of mmengine's that starts with `_` (no release promises to keep it), as used here."""
    module: str  # where the owner is imported from
    owner: str  # a class of that module ('' for the module itself)
    name: str
    kind: str  # 'attribute' (of the class or set on its instances), 'method', 'class'
    params: Optional[Tuple[str, ...]]  # a method's parameters after self, as called or overridden
    used_by: str

    @property
    def qualname(self) -> str:
        return '.'.join(p for p in (self.module, self.owner, self.name) if p)


# Every private mmengine name the suite touches, and one of torch's (a DataLoader iterator's
# `_shutdown_workers`, called by benchmark.dist). Outside a subclass an mmengine name is reached
# only through the functions of this module; a subclass of an mmengine class (SafeCheckpointHook,
# SafeWandbVisBackend, GPUViewPreprocessor, CPUCapableAmpOptimWrapper, the HistoryBuffer update
# above) uses its base's names directly. tests/engine/test_compat.py has one test per entry that
# fails naming it when the installed mmengine has changed it.
PRIVATE_API: Tuple[PrivateName, ...] = (
    PrivateName('mmengine.runner', 'Runner', '_resume', 'attribute', None,
                'runner_resumes (SafeCheckpointHook restores RNG states only on a resume)'),
    PrivateName('mmengine.config', 'DictAction', '_parse_iterable', 'method', ('val',),
                'parse_cfg_option (what --cfg-options makes of a value; suites, tests)'),
    PrivateName('mmengine.hooks', 'CheckpointHook', '_save_checkpoint', 'method', ('runner',),
                'SafeCheckpointHook.save_epoch (the checkpoint a pre-emption saves)'),
    PrivateName('mmengine.hooks', 'CheckpointHook', '_save_checkpoint_with_step', 'method',
                ('runner', 'step', 'meta'),
                'SafeCheckpointHook overrides it (the oldest checkpoint goes after the new one)'),
    PrivateName('mmengine.visualization', 'WandbVisBackend', '_init_env', 'method', (),
                'SafeWandbVisBackend overrides it (offline when wandb cannot start online)'),
    PrivateName('mmengine.visualization', 'WandbVisBackend', '_init_kwargs', 'attribute', None,
                "wandb_init_kwargs and SafeWandbVisBackend (wandb.init's arguments)"),
    PrivateName('mmengine.visualization', 'WandbVisBackend', '_log_code_name', 'attribute', None,
                "SafeWandbVisBackend.add_config (the code artifact's name)"),
    PrivateName('mmengine.logging', 'HistoryBuffer', '_log_history', 'attribute', None,
                'amortized_history_update'),
    PrivateName('mmengine.logging', 'HistoryBuffer', '_count_history', 'attribute', None,
                'amortized_history_update'),
    PrivateName('mmengine.logging', 'HistoryBuffer', '_statistics_methods', 'attribute', None,
                'history_buffer_statistic (what a checkpoint may look up)'),
    PrivateName('mmengine.optim', 'AmpOptimWrapper', '_scale_update_param', 'attribute', None,
                'CPUCapableAmpOptimWrapper'),
    PrivateName('mmengine.model', 'BaseDataPreprocessor', '_non_blocking', 'attribute', None,
                'GPUViewPreprocessor (the copy of a batch to the device)'),
    PrivateName('mmengine.logging', 'MMLogger', '_instance_dict', 'attribute', None,
                "manager_instances (tests close the loggers of the runs they start), "
                "forget_run_instances"),
    PrivateName('mmengine.visualization', 'Visualizer', '_instance_dict', 'attribute', None,
                'forget_run_instances'),
    PrivateName('mmengine.logging', 'MessageHub', '_instance_dict', 'attribute', None,
                'forget_run_instances'),
    PrivateName('torch.utils.data.dataloader', '_MultiProcessingDataLoaderIter',
                '_shutdown_workers', 'method', (), 'benchmark.dist.close_loader_workers'),
    PrivateName('torch.distributed.elastic.agent.server.local_elastic_agent',
                'LocalElasticAgent', '_stop_workers', 'method', ('worker_group',),
                'benchmark.engine.torchrun_job.honor_shutdown_timeout'),
    PrivateName('torch.distributed.elastic.agent.server.local_elastic_agent',
                'LocalElasticAgent', '_shutdown', 'method', ('death_sig', 'timeout'),
                'benchmark.engine.torchrun_job.honor_shutdown_timeout'),
)


def private_api_problem(entry: PrivateName) -> Optional[str]:
    """What is wrong with `entry` in the installed mmengine (None: it is there as used)."""
    try:
        module = importlib.import_module(entry.module)
    except ImportError as err:
        return f'module {entry.module} does not import ({err})'
    owner = getattr(module, entry.owner, None) if entry.owner else module
    if owner is None:
        return f'{entry.module} has no {entry.owner}'
    if entry.kind == 'class':
        return None if inspect.isclass(getattr(owner, entry.name, None)) else 'is not a class'
    if entry.kind == 'method':
        method = inspect.getattr_static(owner, entry.name, None)
        if method is None:
            return 'is gone'
        function = getattr(method, '__func__', method)  # a staticmethod's function
        params = list(inspect.signature(function).parameters)
        if not isinstance(method, staticmethod):
            params = params[1:]  # self
        if entry.params is not None and tuple(params) != entry.params:
            return f'takes ({", ".join(params)}), not ({", ".join(entry.params)})'
        return None
    if hasattr(owner, entry.name):
        return None
    assigned = re.compile(rf'\bself\.{re.escape(entry.name)}\s*(:[^=]*)?=[^=]')
    for cls in owner.__mro__:  # set on the instances by mmengine's own code
        if cls.__module__.startswith('mmengine') and assigned.search(inspect.getsource(cls)):
            return None
    return 'is no longer set by mmengine'


def runner_resumes(runner: Any) -> bool:
    """Whether the Runner resumes a run (``resume=True``) rather than only loading weights."""
    return bool(runner._resume)


def parse_cfg_option(text: str) -> Any:
    """What ``--cfg-options KEY=VALUE`` makes of VALUE: numbers, bools, None, lists, tuples."""
    return DictAction._parse_iterable(text)


def wandb_init_kwargs(backend: Any) -> Dict[str, Any]:
    """The arguments an mmengine wandb backend gives (or gave) ``wandb.init``."""
    return dict(backend._init_kwargs or {})


def manager_instances(cls: Any) -> Dict[str, Any]:
    """The named instances of an mmengine ManagerMixin class (MMLogger, MessageHub...)."""
    return dict(cls._instance_dict)


def forget_run_instances(runner: Any) -> None:
    """Drop the logger, visualizer, message hub and scope mmengine keeps for an ended run, and
    close the logger's handlers (its log file).

    mmengine names them after the run's experiment (the config file's name and the start time
    to the second) and hands out an existing one for a known name (`ManagerMixin.get_instance`,
    with a warning only). A second run of the same config in this process that starts within
    the same second (a resume of a run that had ended trains nothing and ends at once) was
    given the first one's: its closed wandb backend (``wandb.config`` then fails: "You must
    call wandb.init() before wandb.config.update"), its log file and its message hub."""
    from mmengine.logging import MessageHub, MMLogger
    from mmengine.registry import DefaultScope
    from mmengine.visualization import Visualizer
    name = runner.experiment_name
    logger = MMLogger._instance_dict.pop(name, None)
    for cls in (Visualizer, MessageHub, DefaultScope):
        cls._instance_dict.pop(name, None)
    for handler in list(logger.handlers) if logger is not None else ():
        logger.removeHandler(handler)
        handler.close()  # a file handler closes its file; a stream handler leaves its stream


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


def check_local_gpu() -> None:
    """Raise ValueError (one line) unless torch sees a GPU for this torchrun process: mmengine
    gives the process of local rank k GPU k (`torch.cuda.set_device`), which fails with a CUDA
    error and a traceback where fewer are visible."""
    local, count = dist.local_rank(), torch.cuda.device_count()
    if local and local >= count:  # torch sees a GPU: local rank 0 has one
        visible = os.environ.get('CUDA_VISIBLE_DEVICES')
        shown = f' (CUDA_VISIBLE_DEVICES={visible})' if visible is not None else ''
        raise ValueError(f'the process of local rank {local} has no GPU: torch sees {count} CUDA '
                         f'device(s) on this machine{shown}; start at most {count} process(es) '
                         'per machine, or make more GPUs visible')


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
        if launcher == 'pytorch':
            check_local_gpu()
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
        if not (loss_scale == 'dynamic' or isinstance(loss_scale, dict) or (
                isinstance(loss_scale, float) and loss_scale > 0)):  # as mmengine's, unused here
            raise ValueError(f"optim_wrapper.loss_scale must be 'dynamic', a float > 0 or a dict "
                             f'of GradScaler arguments, got {loss_scale!r}')
        if dtype not in ('bfloat16', torch.bfloat16):
            raise ValueError(f"optim_wrapper.dtype={dtype!r}: without a GPU only 'bfloat16' "
                             "autocasts (CPU); set dtype='bfloat16' or use type='OptimWrapper'")
        OptimWrapper.__init__(self, **kwargs)  # skips AmpOptimWrapper's accelerator assert
        self._scale_update_param = None
        self.loss_scaler = torch.amp.GradScaler('cpu', enabled=False)  # identity
        self.cast_dtype = torch.bfloat16
