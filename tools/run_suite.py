"""Run a suite of pretraining runs (configs x variants x seeds), evaluate them, render its table.

python tools/run_suite.py configs/suites/demo_digits.py            # or just: demo_digits
python tools/run_suite.py demo_digits --dry-run                    # the plan: skip/resume/start
python tools/run_suite.py demo_digits --seeds 0 1 --only mixco     # two seeds, MixCo's runs only
python tools/run_suite.py paper_table1_r18 --launcher slurm --partition gpu   # one job array
python tools/run_suite.py demo_digits --seeds 0 1 --publish README.md  # summary into a page
python tools/run_suite.py demo_digits --seeds 0 1 --parallel 2 --procs 1   # 2 runs at once
python tools/run_suite.py demo_digits --until-decided --max-seeds 12 --dry-run  # its looks

A run whose records exist is skipped, one with checkpoints but no record resumes, the rest
start: a killed suite restarted with the same command redoes nothing that finished. Records
and tables go to results/suites/<name>/, runs to work_dirs/suites/<name>/<run>/. Errors in the
suite file or its configs are one line ``error: ...`` with exit code 2, before anything starts.
"""
import argparse
import sys
from pathlib import Path

import benchmark.components  # noqa: F401  registers every type a config can name
from benchmark.cli import (ArgumentParser, existing_file, non_negative_int, output_dir,
                           positive_int, run_tool)
from benchmark.suites.suite import run_suite
from benchmark.layout import PAPER_RESULTS, RESULTS_DIR, WORK_DIRS


def parse_args(argv=None) -> argparse.Namespace:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('suite', help='configs/suites/<name>.py, or its name')
    parser.add_argument('--dry-run', action='store_true', help='print the plan and exit')
    parser.add_argument('--only', metavar='PATTERN',
                        help='run only the runs whose name matches (glob, or a substring)')
    parser.add_argument('--launcher', choices=['local', 'slurm'], default='local',
                        help='local: tools/dist_train.sh here (--parallel runs at once); slurm: one '
                        'SLURM job array through submitit, one task per run')
    parser.add_argument('--wait', action='store_true',
                        help='with --launcher slurm: wait for the array to end, then render '
                        'the table (default: submit and return; rerun to render)')
    parser.add_argument('--parallel', type=positive_int, default=1, metavar='N',
                        help='local launcher: up to N runs at once, each on its own GPUs '
                        '(procs each) or its share of the CPU cores, its evaluations after it')
    parser.add_argument('--procs', type=positive_int, metavar='N',
                        help="processes per run instead of the suite's procs (another setting: "
                        'keep its runs apart with --work-root and --results-root)')
    parser.add_argument('--partition',
                        help="SLURM partition (default: the suite's slurm.partition)")
    parser.add_argument('--seeds', type=non_negative_int, nargs='+', metavar='S',
                        help="replace the suite's seeds")
    parser.add_argument('--results-root', default=RESULTS_DIR, type=output_dir,
                        help='records and tables go to ROOT/suites/<name>/')
    parser.add_argument('--work-root', default=WORK_DIRS, type=output_dir,
                        help='runs train in ROOT/suites/<name>/<run>/')
    parser.add_argument('--paper', default=str(PAPER_RESULTS),
                        type=lambda t: t if t.lower() == 'none' else existing_file(t),
                        help="the paper's numbers (CSV); 'none' for no reference rows")
    parser.add_argument('--publish', metavar='PAGE',
                        help='also put the summary (tables, verdicts, interval plot) into the '
                        'Markdown PAGE, between its lines <!-- results: NAME --> and '
                        '<!-- /results: NAME --> (figures go to figures/ beside it)')
    parser.add_argument('--until-decided', action='store_true',
                        help='train seeds in rounds until each primary comparison is decided '
                        '(better, worse or equivalent), with a group-sequential design that '
                        'keeps the error rate over all looks (docs/evaluation.md)')
    parser.add_argument('--max-seeds', type=positive_int, metavar='N',
                        help='--until-decided: at most N seeds per method (default 12)')
    parser.add_argument('--round', type=positive_int, metavar='K',
                        help='--until-decided: seeds added per round, one look after each '
                        '(default 2)')
    parser.add_argument('--no-wandb', action='store_true', help='do not log the table to wandb')
    parser.add_argument('--debug', action='store_true', help='show tracebacks')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)  # a SuiteError (a ValueError) is one line through run_tool
    if not args.until_decided and (args.max_seeds or args.round):
        raise ValueError('--max-seeds and --round go with --until-decided')
    return run_suite(args.suite, dry_run=args.dry_run, only=args.only,
                     launcher=args.launcher, seeds=args.seeds,
                     results_root=args.results_root, work_root=args.work_root,
                     partition=args.partition,
                     paper=None if args.paper.lower() == 'none' else Path(args.paper),
                     use_wandb=not args.no_wandb, publish_to=args.publish, wait=args.wait,
                     parallel=args.parallel, procs=args.procs,
                     until_decided=(args.max_seeds or 12, args.round or 2) if args.until_decided else None,
                     out=lambda *a, **k: print(*a, **{**k, 'flush': True}))


if __name__ == '__main__':
    sys.exit(run_tool(main))
