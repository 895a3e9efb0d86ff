"""Pretrain a model from an mmengine config.

One process:   python tools/train.py configs/mixco_r18_tiny.py
Several:       tools/dist_train.sh configs/mixco_r18_tiny.py 2   (torchrun; GPUs or CPU processes)
Exit codes: 0 done, 2 bad input, 3 diverged, 74 disk full, 75 work dir trained by another
process, 143 pre-empted (docs/crash-safety.md).
"""
import argparse
import os
import sys

import benchmark.engine.held_signals as held_signals  # first: holds stop signals from here on

import torch
from mmengine.runner import Runner

import benchmark.components  # noqa: F401  registers every type a config can name
from benchmark import dist, stop
from benchmark.engine.channels_last import use_channels_last_wrapper
from benchmark.engine.checkpoints import check_resume_fits
from benchmark.cli import ArgumentParser, config_line, fail
from benchmark.engine.compat import (allow_mmengine_checkpoints, forget_run_instances,
                                     setup_cpu_distributed)
from benchmark.engine.config.check import CfgOptionsAction, validate_config
from benchmark.engine.config.views import resolve_train_views
from benchmark.engine.late_errors import bad_input, late_exit
from benchmark.engine.launch import (check_data, config_identity, config_setting,
                                     load_config, pin_batches)
from benchmark.engine.nan_guard import DivergedError
from benchmark.engine.preemption import PreemptionHook, tell_launcher
from benchmark.engine.prefetch_loop import use_prefetch_loop
from benchmark.engine.progress import ProgressHook
from benchmark.engine.tracking import configure_wandb
from benchmark.engine.work_dir_lock import (RESUME_WAIT_S, WorkDirBusy, check_work_dir_free,
                                           hold_work_dir, release_work_dir)
from benchmark.evaluation.evaluate import AfterTrain, evaluate_run, record_divergence
from benchmark.exit_codes import DIVERGED_EXIT_CODE, WORK_DIR_BUSY_EXIT_CODE


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='config file, e.g. configs/mixco_r18_tiny.py')
    parser.add_argument('--work-dir', help='where checkpoints and logs go '
                        '(default: work_dirs/<config name>)')
    parser.add_argument('--resume', nargs='?', const='auto', default=None, metavar='CKPT',
                        help='resume from CKPT, or from the latest checkpoint of the work dir')
    parser.add_argument('--cfg-options', nargs='+', action=CfgOptionsAction, default={},
                        metavar='KEY=VALUE', help='override config keys, e.g. '
                        'train_dataloader.batch_size=32 train_cfg.max_epochs=1')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm'], default='none')
    parser.add_argument('--no-eval', action='store_true',
                        help='skip the kNN / fast linear / cluster report after training')
    parser.add_argument('--results-dir', default='results', help='evaluation records go to DIR/runs/')
    parser.add_argument('--check-only', action='store_true', help='check the config and exit '
                        '(0, or 2 with one line); no data is read, nothing is trained')
    parser.add_argument('--debug', action='store_true', help='show tracebacks of errors')
    return parser.parse_args(argv)


def build_runner(args: argparse.Namespace) -> tuple:
    """Load and check the config (before any data is read), then build the Runner; also the
    config's identity (what its records' config_sha256 hashes, and their setting), taken
    before the run edits it.
    With --check-only: (None, None) once the config is checked (dist_train.sh checks once, in
    one process, before it starts the processes)."""
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.launcher)
    validate_config(cfg)  # the world size comes from torchrun's WORLD_SIZE
    wait_s = RESUME_WAIT_S if args.resume else 0.0  # the stopped job may still be saving
    if args.check_only:
        if os.environ.get('NODE_RANK', '0') == '0':  # several machines: node 0's trainer holds it
            check_work_dir_free(cfg.work_dir, wait_s)
        return None, None
    hold_work_dir(cfg.work_dir, wait_s)  # rank 0, until this process ends: one trainer per dir
    if args.resume:  # chosen once the work dir is ours (another trainer may be writing there)
        cfg = load_config(args.config, args.cfg_options, args.work_dir, args.launcher, args.resume)
    identity = dict(config_text=config_identity(cfg), setting=config_setting(cfg, args.config))
    resolve_train_views(cfg, torch.cuda.is_available())  # train_views='auto': on a GPU, there
    pin_batches(cfg, torch.cuda.is_available())
    use_prefetch_loop(cfg)  # device views: the next batch's drawn while the step runs
    use_channels_last_wrapper(cfg)  # DDP wraps an NHWC model (bit-identical resume)
    check_data(cfg)
    warning = configure_wandb(cfg)
    if warning and dist.is_main():
        print(warning, file=sys.stderr)
    setup_cpu_distributed(cfg, args.launcher)
    runner = Runner.from_cfg(cfg)
    if cfg.resume and cfg.load_from:  # the model exists, the data does not yet
        check_resume_fits(runner.model, cfg.load_from)
    return runner, identity


def main(argv=None) -> int:
    args = parse_args(argv)
    allow_mmengine_checkpoints()
    try:
        runner, identity = build_runner(args)
    except WorkDirBusy as err:  # rank 0 (after dist_train.sh's check, only if it lost a race)
        fail(str(err))
        tell_launcher(WORK_DIR_BUSY_EXIT_CODE, f'error: {err}')
        return WORK_DIR_BUSY_EXIT_CODE
    except (ValueError, OSError, TypeError, KeyError, AssertionError) as err:  # mmengine asserts
        if args.debug:
            raise
        return bad_input(config_line(args.config, err))  # told to dist_train.sh too
    if runner is None:
        return 0
    if not any(isinstance(hook, PreemptionHook) for hook in runner.hooks):
        held_signals.release()  # nothing will take a held signal over: its default action
    try:
        code = train(runner, args, identity)
    finally:  # the process usually ends here, which gives it up as well
        release_work_dir(runner.cfg.work_dir)
        forget_run_instances(runner)  # a later run in this process gets its own
    del runner  # its DDP wrapper holds the process group: freed now, not at the shutdown
    dist.free_groups()
    return code


def train(runner, args: argparse.Namespace, identity: dict) -> int:
    """Train (and evaluate) with the built runner; the exit code."""
    cfg = runner.cfg
    runner.register_hook(ProgressHook())  # epoch, ETA and progress.json; not a config key
    if not args.no_eval:  # inside the run, so the metrics reach its still-open wandb run
        runner.register_hook(AfterTrain(lambda r, trained: evaluate_run(
            r, cfg, args.results_dir, trained=trained, **identity)), priority='LOWEST')
    try:
        runner.train()
    except DivergedError as err:
        if args.debug:
            raise
        runner.logger.error(str(err))
        if not args.no_eval and dist.is_main():
            path = record_divergence(runner, cfg, args.results_dir, str(err), **identity)
            runner.logger.error(f'diverged run recorded: {path}')
        if not err.elsewhere:  # the process that met it says it (torchrun would end with 1)
            tell_launcher(DIVERGED_EXIT_CODE, f'error: {err}')
        dist.leave_together()
        return DIVERGED_EXIT_CODE
    except Exception as err:  # noqa: BLE001 - a full disk, a file gone bad, another's end
        code = None if args.debug else late_exit(runner, err, args.config)
        if code is None:
            raise
        return code
    dist.leave_together()
    return 0


if __name__ == '__main__':  # not run_tool: an error in training keeps its traceback (every
    # process); Ctrl-C ends it with one line and 130; SIGTERM is a pre-emption (saves, 143)
    sys.exit(stop.stoppable(main, stop.CTRL_C, 'rerun with --resume', exit_now=True))
