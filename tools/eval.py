"""Evaluate a checkpoint (ours, the MixCo/MoCo authors', or a torchvision ResNet) and record it.

python tools/eval.py configs/mixco_r18_tiny.py work_dirs/mixco_r18_tiny/epoch_100.pth
python tools/eval.py configs/mixco_r18_tiny.py CKPT --eval-data cifar10 --data-root data
python tools/eval.py configs/mixco_r18_digits.py random   # the randomly initialised encoder
"""
import argparse
import os.path as osp
import sys
import tempfile

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # run from a checkout

import torch  # noqa: E402
from mmengine.config import Config  # noqa: E402

import benchmark.datasets  # noqa: E402,F401  registers the datasets
from benchmark.checkpoints import (CheckpointMismatchError, checkpoint_meta,  # noqa: E402
                                   load_backbone)
from benchmark.config_check import (CfgOptionsAction, ConfigError, merge_options,  # noqa: E402
                                     validate_config)
from benchmark.datasets import DataRootError  # noqa: E402
from benchmark.evaluation import (DATA_NAMES, describe_run, eval_dataset_cfg,  # noqa: E402
                                  evaluate_backbone, record_evaluation)
from benchmark.linear_paper import (default_linear_config, linear_work_dir,  # noqa: E402
                                    run_linear_paper)
from benchmark.protocols import PROTOCOLS  # noqa: E402
from benchmark.run_report import write_run_report  # noqa: E402
from methods import build_resnet  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='the pretraining config of the checkpoint')
    parser.add_argument('checkpoint', help="checkpoint file, or 'random' for a random init")
    parser.add_argument('--protocols', nargs='+', default=['knn', 'linear_fast', 'cluster', 'tsne'],
                        choices=(*PROTOCOLS, 'linear_paper'), metavar='P',
                        help=f"any of {[*PROTOCOLS, 'linear_paper']}")
    parser.add_argument('--linear-config', help='config of the linear_paper protocol '
                        '(default: configs/eval/linear_r18_<eval data>.py)')
    parser.add_argument('--eval-data', choices=sorted(DATA_NAMES.values()),
                        help='evaluate on another dataset (transfer); default: the pretraining data')
    parser.add_argument('--data-root', help='root of the evaluation data')
    parser.add_argument('--results-dir', default='results', help='records go to DIR/runs/')
    parser.add_argument('--batch-size', type=int, default=256)
    parser.add_argument('--num-workers', type=int, default=2)
    parser.add_argument('--cfg-options', nargs='+', action=CfgOptionsAction, default={})
    parser.add_argument('--debug', action='store_true', help='show tracebacks of errors')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        cfg = Config.fromfile(args.config)
        merge_options(cfg, args.cfg_options)
        validate_config(cfg)
        dataset_cfg = eval_dataset_cfg(cfg, args.eval_data, args.data_root)
        run, meta, layout = describe_run(cfg), {}, 'random-init'
        torch.manual_seed(run['seed'])  # the same random encoder every time for 'random'
        backbone = build_resnet(**cfg.model.get('backbone', {}))
        if args.checkpoint != 'random':
            if not osp.isfile(args.checkpoint):
                raise FileNotFoundError(f'checkpoint {args.checkpoint} not found')
            layout = load_backbone(backbone, args.checkpoint)
            meta = checkpoint_meta(args.checkpoint)
            run = describe_run(cfg, meta)
            if layout != 'mixco-bench':
                run['method'] = f"{run['method']} ({layout})"
        else:
            run.update(method='random_init', pretrain_epochs=0)
        eval_data = args.eval_data or run['pretrain_data']
        figure = osp.join(tempfile.mkdtemp(), 'tsne.png')
        feature_protocols = [p for p in args.protocols if p in PROTOCOLS]
        protocols = evaluate_backbone(backbone, dataset_cfg, feature_protocols, args.batch_size,
                                      args.num_workers, run['seed'], figure,
                                      f"{run['method']} {run['backbone']} on {eval_data}"
                                      ) if feature_protocols else {}
        if 'linear_paper' in args.protocols:
            linear_cfg = args.linear_config or default_linear_config(eval_data)
            protocols['linear_paper'] = run_linear_paper(
                linear_cfg, None if args.checkpoint == 'random' else args.checkpoint,
                dict(cfg.model.get('backbone', {})), dataset_cfg['data_root'],
                linear_work_dir(args.config, args.checkpoint, linear_cfg))
    except (DataRootError, CheckpointMismatchError, FileNotFoundError, ValueError) as err:
        if args.debug:
            raise
        where = f'{args.config}: ' if isinstance(err, ConfigError) else ''
        print(f'error: {where}{err}', file=sys.stderr)
        return 2
    path = record_evaluation(protocols, run, eval_data, args.results_dir,
                             None if args.checkpoint == 'random' else args.checkpoint,
                             cfg.pretty_text, extra=dict(checkpoint_layout=layout,
                                                         memory_kind=meta.get('memory_kind')))
    for name, entry in protocols.items():
        print(f'{name}: ' + ', '.join(f'{k}={v:.2f}' if isinstance(v, float) else f'{k}={v}'
                                      for k, v in entry['metrics'].items()))
    print(f'record: {path}')
    # Curves come from the training logs beside one of our checkpoints; others get none.
    logs = osp.dirname(osp.abspath(args.checkpoint)) if layout == 'mixco-bench' else None
    print(f'report: {write_run_report(str(path), logs)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
