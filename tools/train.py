"""Pretrain a model from an mmengine config.

One process:   python tools/train.py configs/mixco_r18_tiny.py
Several:       tools/dist_train.sh configs/mixco_r18_tiny.py 2   (torchrun; GPUs or CPU processes)
Exit codes: 0 done, 2 bad input, 3 diverged, 74 disk full, 75 work dir trained by another
process, 143 pre-empted (docs/crash-safety.md).
"""
import argparse
import sys

import benchmark.engine.held_signals as held_signals  # first: holds stop signals from here on

from mmengine.runner import Runner

import benchmark.components  # noqa: F401  registers every type a config can name
from benchmark import dist, stop
from benchmark.cli import ArgumentParser, config_line
from benchmark.engine.checkpoints import check_resume_fits
from benchmark.engine.compat import allow_mmengine_checkpoints, forget_run_instances
from benchmark.engine.config.check import CfgOptionsAction
from benchmark.engine.late_errors import bad_input, busy_exit, late_exit
from benchmark.engine.launch import prepare_run
from benchmark.engine.preemption import PreemptionHook
from benchmark.engine.progress import ProgressHook
from benchmark.engine.work_dir_lock import RESUME_WAIT_S, WorkDirBusy, release_work_dir
from benchmark.evaluation.evaluate import AfterTrain, evaluate_run, record_divergence


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
    """The prepared run's Runner (checked before any data is read: `prepare_run`) and its
    identity; (None, None) with --check-only once the config is checked."""
    run = prepare_run(args, RESUME_WAIT_S)
    if run is None:
        return None, None
    runner = Runner.from_cfg(run.cfg)
    if run.resume:  # the model exists, the data does not yet
        check_resume_fits(runner.model, run.resume)
    return runner, run.identity


def main(argv=None) -> int:
    args = parse_args(argv)
    allow_mmengine_checkpoints()
    try:
        runner, identity = build_runner(args)
    except WorkDirBusy as err:
        return busy_exit(err)
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
    except Exception as err:  # noqa: BLE001 - a divergence, a full disk, a file gone bad...
        code = None if args.debug else late_exit(runner, err, args.config, None if args.no_eval
                                                 else lambda line: record_divergence(
                                                     runner, cfg, args.results_dir, line,
                                                     **identity))
        if code is None:
            raise
        return code
    dist.leave_together()
    return 0


if __name__ == '__main__':  # not run_tool: an error in training keeps its traceback (every
    # process); Ctrl-C ends it with one line and 130; SIGTERM is a pre-emption (saves, 143)
    sys.exit(stop.stoppable(main, stop.CTRL_C, 'rerun with --resume', exit_now=True))
