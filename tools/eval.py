"""Evaluate a checkpoint (ours, the MixCo/MoCo authors', or a torchvision ResNet) and record it.

python tools/eval.py configs/mixco_r18_tiny.py work_dirs/mixco_r18_tiny/epoch_100.pth
python tools/eval.py configs/mixco_r18_tiny.py CKPT --eval-data cifar10 --data-root data
python tools/eval.py configs/mixco_r18_digits.py random   # the randomly initialised encoder
python tools/eval.py configs/mixco_r18_tiny.py CKPT --device cuda:1   # features, kNN, probe there
"""
import argparse
import os.path as osp
import sys
import time

import benchmark.components  # noqa: F401  registers every type a config can name
from benchmark import stop
from benchmark.cli import (ArgumentParser, existing_file, non_negative_int, output_dir,
                           positive_int, run_tool)
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import CfgOptionsAction, merge_options, read_config
from benchmark.engine.config_text import config_identity, config_setting
from benchmark.engine.progress import duration
from benchmark.evaluation.device import eval_device
from benchmark.evaluation.evaluate import evaluate_checkpoint, record_evaluation
from benchmark.names import (DATA_NAMES, DEFAULT_PROTOCOLS, FEATURE_PROTOCOLS,
                             PROTOCOL_ALIASES, protocol_name)
from benchmark.reports.run_report import write_run_report


def device_arg(text: str) -> str:
    """An argparse type: a device this machine has ('cpu', 'cuda', 'cuda:N')."""
    try:
        return str(eval_device(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', type=existing_file,
                        help='the pretraining config of the checkpoint')
    parser.add_argument('checkpoint', type=lambda t: t if t == 'random' else existing_file(t),
                        help="checkpoint file, or 'random' for a random init")
    parser.add_argument('--protocols', nargs='+', default=list(DEFAULT_PROTOCOLS),
                        choices=(*FEATURE_PROTOCOLS, 'linear_paper', *PROTOCOL_ALIASES),
                        metavar='P', help=f"any of {[*FEATURE_PROTOCOLS, 'linear_paper']}")
    parser.add_argument('--linear-config', type=existing_file, help='config of the linear_paper protocol '
                        '(default: configs/eval/linear_r18_<eval data>.py)')
    parser.add_argument('--eval-data', choices=sorted(DATA_NAMES.values()),
                        help='evaluate on another dataset (transfer); default: the pretraining data')
    parser.add_argument('--data-root', help='root of the evaluation data')
    parser.add_argument('--results-dir', default='results', type=output_dir,
                        help='records go to DIR/runs/')
    parser.add_argument('--work-dir', help="linear_paper's run goes into DIR "
                        '(default: work_dirs/<config name>/)')
    parser.add_argument('--batch-size', type=positive_int, default=256)
    parser.add_argument('--num-workers', type=non_negative_int, default=2)
    parser.add_argument('--device', type=device_arg, default=None,
                        help="where feature extraction, kNN and the fast linear probe run: "
                        "'cpu', 'cuda' or 'cuda:N' (default: 'cuda' when torch sees a GPU, "
                        "else 'cpu'); linear_paper runs as its own mmengine run (the GPU when "
                        "there is one)")
    parser.add_argument('--cfg-options', nargs='+', action=CfgOptionsAction, default={})
    parser.add_argument('--debug', action='store_true', help='show tracebacks of errors')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        cfg = read_config(args.config)
        merge_options(cfg, args.cfg_options)
        validate_config(cfg)
    except ConfigError as err:  # name the config; checkpoint and data errors name their file
        raise ConfigError(f'{args.config}: {err}') from None
    # The protocols on extracted features, then linear_paper (its own run): a line as each
    # part starts and ends, with its time.
    names = [protocol_name(p) for p in args.protocols]
    out = None
    parts = [p for p in names if p != 'linear_paper'], [p for p in names if p == 'linear_paper']
    stop.plan([*(', '.join(part) for part in parts if part), 'record'])  # Ctrl-C's line
    for part in parts:
        if not part:
            continue
        label, start = ', '.join(part), time.monotonic()
        print(f'{label}: started', flush=True)
        done = evaluate_checkpoint(cfg, args.checkpoint, part, args.eval_data, args.data_root,
                                   args.linear_config, args.batch_size, args.num_workers,
                                   work_dir_of=args.config, work_dir=args.work_dir,
                                   device=args.device)
        print(f'{label}: done in {duration(time.monotonic() - start)}', flush=True)
        stop.finished(label)
        if out is None:
            out = done
        else:
            out['protocols'].update(done['protocols'])
    mine = args.checkpoint != 'random'
    path = record_evaluation(out['protocols'], out['run'], out['eval_data'], args.results_dir,
                             args.checkpoint if mine else None, config_identity(cfg),
                             setting=config_setting(cfg, args.config),
                             extra=dict(checkpoint_layout=out['layout'],
                                        memory_kind=out['meta'].get('memory_kind'),
                                        key_bn=out['meta'].get('key_bn')))
    stop.finished('record')
    for name, entry in out['protocols'].items():
        print(f'{name}: ' + ', '.join(f'{k}={v:.2f}' if isinstance(v, float) else f'{k}={v}'
                                      for k, v in entry['metrics'].items()))
    print(f'record: {path}')
    # Curves come from the training logs beside one of our checkpoints; others get none.
    logs = osp.dirname(osp.abspath(args.checkpoint)) if out['layout'] == 'mixco-bench' else None
    print(f'report: {write_run_report(str(path), logs)}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
