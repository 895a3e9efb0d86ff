"""Pretrain a model from an mmengine config.

Several processes: tools/dist_train.sh CONFIG N (torchrun). Exit codes (docs/crash-safety.md):
0 done, 2 bad input, 3 diverged, 74 disk full, 75 work dir trained by another, 143 pre-empted."""
import argparse
import sys

import benchmark.engine.held_signals  # noqa: F401  first: holds stop signals from here on

import benchmark.components  # noqa: F401  registers every type a config can name
from benchmark import dist, stop
from benchmark.cli import ArgumentParser
from benchmark.engine.config_file import CfgOptionsAction
from benchmark.engine.late_errors import START_ERRORS, late_exit, start_exit
from benchmark.engine.launch import build_runner, end_run
from benchmark.engine.work_dir_lock import RESUME_WAIT_S
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
    parser.add_argument('--results-dir', default='results',
                        help='evaluation records go to DIR/runs/')
    parser.add_argument('--check-only', action='store_true', help='check the config and exit '
                        '(0, or 2 with one line); no data is read, nothing is trained')
    parser.add_argument('--debug', action='store_true', help='show tracebacks of errors')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        runner, identity = build_runner(args, RESUME_WAIT_S)
    except START_ERRORS as err:  # one line, told to dist_train.sh too
        return start_exit(err, args.config, args.debug)
    if runner is None:
        return 0
    try:
        code = train(runner, args, identity)
    finally:  # the process usually ends here, which gives the work dir up as well
        end_run(runner)
    del runner  # its DDP wrapper holds the process group: freed now, not at the shutdown
    dist.free_groups()
    return code


def train(runner, args: argparse.Namespace, identity: dict) -> int:
    """Train (and evaluate) with the built runner; the exit code."""
    if not args.no_eval:  # inside the run, so the metrics reach its still-open wandb run
        runner.register_hook(AfterTrain(lambda r, trained: evaluate_run(
            r, r.cfg, args.results_dir, trained=trained, **identity)), priority='LOWEST')
    try:
        runner.train()
    except Exception as err:  # noqa: BLE001 - a divergence, a full disk, a file gone bad...
        record = None if args.no_eval else (lambda line: record_divergence(
            runner, runner.cfg, args.results_dir, line, **identity))
        if args.debug or (code := late_exit(runner, err, args.config, record)) is None:
            raise
        return code
    dist.leave_together()
    return 0


if __name__ == '__main__':  # a training error keeps its traceback; Ctrl-C: one line and 130
    sys.exit(stop.stoppable(main, stop.CTRL_C, 'rerun with --resume', exit_now=True))
