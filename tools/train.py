"""Pretrain a model from an mmengine config.

One process:   python tools/train.py configs/mixco_r18_tiny.py
Several:       tools/dist_train.sh configs/mixco_r18_tiny.py 2   (torchrun; GPUs or CPU processes)
"""
import argparse
import json
import os
import os.path as osp
import sys
from pathlib import Path

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import torch.distributed as torch_dist  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.dist import get_rank  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402
from mmengine.registry import DATASETS  # noqa: E402
from mmengine.runner import Runner  # noqa: E402

import benchmark.datasets  # noqa: E402,F401  registers the datasets
import methods  # noqa: E402,F401  registers the models
from benchmark.compat import allow_mmengine_checkpoints, setup_cpu_distributed  # noqa: E402
from benchmark.config_check import CfgOptionsAction, merge_options, validate_config  # noqa: E402
from benchmark.data.gpu_views import fill_view_size  # noqa: E402
from benchmark.datasets import DataRootError  # noqa: E402
from benchmark.evaluation import (describe_run, eval_dataset_cfg, evaluate_backbone,  # noqa: E402
                                  record_evaluation)
from benchmark.hooks import RunInfoHook  # noqa: E402
from benchmark.nan_guard import DivergedError  # noqa: E402
from benchmark.resume import choose_resume_checkpoint, loadable  # noqa: E402
from benchmark.report import build_record, write_record  # noqa: E402
from benchmark.run_report import write_run_report  # noqa: E402
from benchmark.tracking import configure_wandb, log_record  # noqa: E402
from benchmark.views import build_view  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    parser.add_argument('--debug', action='store_true', help='show tracebacks of errors')
    return parser.parse_args(argv)


def load_config(args: argparse.Namespace) -> Config:
    """The config with command-line overrides applied, work dir, launcher and resume set."""
    if not osp.isfile(args.config):
        raise FileNotFoundError(f'config {args.config} not found; see configs/ for the list')
    cfg = Config.fromfile(args.config)
    merge_options(cfg, args.cfg_options)
    fill_view_size(cfg)  # views on the device: their size follows the dataset's input_size
    if args.work_dir:
        cfg.work_dir = args.work_dir
    elif not cfg.get('work_dir'):
        cfg.work_dir = osp.join('work_dirs', osp.splitext(osp.basename(args.config))[0])
    cfg.launcher = args.launcher
    if args.resume == 'auto':
        path, messages = choose_resume_checkpoint(cfg.work_dir)
        if os.environ.get('RANK', '0') == '0':
            for line in messages:
                print(f'resume: {line}', file=sys.stderr)
        cfg.resume, cfg.load_from = path is not None, path
    elif args.resume:
        reason = loadable(args.resume) if osp.isfile(args.resume) else 'no such file'
        if reason:
            raise ValueError(f'--resume {args.resume}: cannot load it ({reason}); '
                             'pass another checkpoint or --resume alone for the newest loadable')
        cfg.resume, cfg.load_from = True, args.resume
    return cfg


def check_data(cfg: Config) -> None:
    """Fail on a missing or malformed data root before any model or data is built."""
    dataset = cfg.train_dataloader.dataset
    if DATASETS.get(dataset.type) is None:
        raise ValueError(f'train_dataloader.dataset.type: unknown dataset {dataset.type!r}')
    DATASETS.get(dataset.type).check_root(dataset.get('data_root', ''), dataset.get('split', 'train'))
    build_view(dataset.get('view', 'mocov2'), dataset.get('input_size', 224))
    if hasattr(DATASETS.get(dataset.type), 'check_images'):  # decode every image file (cached)
        DATASETS.get(dataset.type).check_images(dataset.get('data_root', ''),
                                                dataset.get('split', 'train'),
                                                dataset.get('bad_data', 'strict'))


def main(argv=None) -> int:
    args = parse_args(argv)
    allow_mmengine_checkpoints()
    try:
        cfg = load_config(args)
        validate_config(cfg)  # before any data is read
        check_data(cfg)
        warning = configure_wandb(cfg)
        if warning and os.environ.get('RANK', '0') == '0':
            print(warning, file=sys.stderr)
        setup_cpu_distributed(cfg, args.launcher)
        runner = Runner.from_cfg(cfg)
    except (DataRootError, FileNotFoundError, ValueError, TypeError, KeyError) as err:
        if args.debug:
            raise
        if os.environ.get('RANK', '0') == '0':
            print(f'error: {args.config}: {err}', file=sys.stderr)
        return 2
    if not args.no_eval:  # inside the run, so the metrics reach its still-open wandb run
        runner.register_hook(AfterTrain(lambda r: evaluate_run(r, cfg, args.results_dir)),
                             priority='LOWEST')
    try:
        runner.train()
    except DivergedError as err:
        if args.debug:
            raise
        runner.logger.error(str(err))
        if not args.no_eval and get_rank() == 0:
            path = record_divergence(runner, cfg, args.results_dir, str(err))
            runner.logger.error(f'diverged run recorded: {path}')
        leave_together()
        return DIVERGED_EXIT_CODE
    leave_together()
    return 0


def leave_together() -> None:
    """Wait for every process (rank 0 may still be evaluating), then close the process group.

    A process that exits while another still holds the gloo connection can be aborted by
    gloo's teardown (SIGABRT), failing a run that had finished.
    """
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        torch_dist.destroy_process_group()


DIVERGED_EXIT_CODE = 3


def record_divergence(runner: Runner, cfg: Config, results_dir: str, message: str) -> Path:
    """A record with status 'diverged' (NA metrics), so the run shows instead of vanishing."""
    hook = next(h for h in runner.hooks if isinstance(h, RunInfoHook))
    run = describe_run(cfg, dict(hook.info(runner), epoch=runner.epoch))
    reason = f'NA(diverged at iteration {runner.iter + 1})'
    protocols = {name: dict(settings={}, metrics=dict(top1=reason)) for name in ('knn', 'linear_fast')}
    record = build_record(**run, eval_data=run['pretrain_data'], protocols=protocols,
                          config_text=cfg.pretty_text, status='diverged',
                          extra=dict(error=message))
    return write_record(record, results_dir)


class AfterTrain(Hook):
    """Call a function once training has ended, before the loggers close."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def after_train(self, runner) -> None:
        self.fn(runner)


TRAIN_PROTOCOLS = ('knn', 'linear_fast', 'cluster', 'tsne')


def evaluate_run(runner: Runner, cfg: Config, results_dir: str) -> None:
    """Default protocols on the pretraining data's splits; rank 0 writes the record."""
    model = runner.model.module if hasattr(runner.model, 'module') else runner.model
    hook = next(h for h in runner.hooks if isinstance(h, RunInfoHook))
    skipped = getattr(runner.train_dataloader.dataset, 'skipped_files', 0)  # bad_data=skip
    run = describe_run(cfg, dict(hook.info(runner), epoch=runner.epoch, data_skipped=skipped))
    figure = osp.join(cfg.work_dir, 'tsne.png')
    protocols = evaluate_backbone(model.backbone, eval_dataset_cfg(cfg), TRAIN_PROTOCOLS,
                                  seed=run['seed'],
                                  figure_path=figure, title=f"{run['method']} {run['backbone']}")
    if protocols is None:
        return
    last = osp.join(cfg.work_dir, f'epoch_{runner.epoch}.pth')
    path = record_evaluation(protocols, run, run['pretrain_data'], results_dir,
                             last if osp.isfile(last) else None, cfg.pretty_text,
                             extra=dict(memory_kind=hook.info(runner)['memory_kind']))
    runner.logger.info(f'evaluation record: {path}')
    runner.logger.info(f'run report: {write_run_report(str(path), cfg.work_dir)}')
    log_record(runner.visualizer, json.loads(Path(path).read_text()))


if __name__ == '__main__':
    sys.exit(main())
