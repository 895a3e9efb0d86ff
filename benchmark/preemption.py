"""SIGTERM / SIGUSR1: finish the step, save a checkpoint, exit 143 so the scheduler requeues."""
import os
import os.path as osp
import signal
import sys

import torch
import torch.distributed as dist
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM: what schedulers expect from a terminated job
PREEMPTED_MARKER = 'preempted'  # file in the work dir (and $PREEMPT_MARKER for dist_train.sh)


def any_process(flag: bool) -> bool:
    """True on every process if ``flag`` is True on any (a collective when distributed)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    backend = dist.get_backend()
    device = 'cuda' if backend == 'nccl' else 'cpu'
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item() > 0)


@HOOKS.register_module()
class PreemptionHook(Hook):
    """Turn SIGTERM/SIGUSR1 into "finish this step, checkpoint, exit 143" on every process.

    The handler only sets a flag; after each iteration all processes agree on it (one tiny
    all-reduce), save `iter_<n>.pth` through `SafeCheckpointHook`, write the `preempted`
    marker and exit with code 143. Resume with `--resume`.

    Args:
        signals: Signal names to handle.
    """

    priority = 'LOWEST'  # after the iteration's own checkpoint and logging

    def __init__(self, signals=('SIGTERM', 'SIGUSR1')) -> None:
        self.signals = tuple(signals)
        self.received = None

    def _handle(self, signum, frame) -> None:  # noqa: ARG002
        self.received = signal.Signals(signum).name

    def before_train(self, runner) -> None:
        for name in self.signals:
            signal.signal(getattr(signal, name), self._handle)
        marker = osp.join(runner.work_dir, PREEMPTED_MARKER)
        if osp.exists(marker) and int(os.environ.get('RANK', '0')) == 0:
            os.remove(marker)

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if not any_process(self.received is not None):
            return
        if (runner.iter + 1) % len(runner.train_dataloader) == 0:
            return  # the epoch's last step: its end-of-epoch work runs first (after_train_epoch)
        from .checkpoint_hook import SafeCheckpointHook
        saver = next(h for h in runner.hooks if isinstance(h, SafeCheckpointHook))
        self._exit(runner, saver.save_iteration(runner))

    def after_train_epoch(self, runner) -> None:
        if not any_process(self.received is not None):
            return
        from .checkpoint_hook import SafeCheckpointHook
        saver = next(h for h in runner.hooks if isinstance(h, SafeCheckpointHook))
        saver._save_checkpoint(runner)  # epoch_<n>.pth (a no-op rename if the epoch saved it)
        self._exit(runner, saver.last_ckpt)

    def _exit(self, runner, path: str) -> None:
        runner.logger.warning(
            f'{self.received or "signal on another process"}: saved {path} after iteration '
            f'{runner.iter + 1}; exiting with {PREEMPTED_EXIT_CODE} (resume with --resume)')
        markers = []
        if int(os.environ.get('RANK', '0')) == 0:
            markers.append(osp.join(runner.work_dir, PREEMPTED_MARKER))
        if os.environ.get('PREEMPT_MARKER') and int(os.environ.get('LOCAL_RANK', '0')) == 0:
            markers.append(os.environ['PREEMPT_MARKER'])  # tools/dist_train.sh of this machine
        for marker in markers:
            with open(marker, 'w') as handle:
                handle.write(f'{runner.iter + 1}\n')
        if dist.is_available() and dist.is_initialized():
            dist.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(PREEMPTED_EXIT_CODE)  # no teardown that could hang on a half-gone job
