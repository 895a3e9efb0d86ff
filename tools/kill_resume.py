"""Kill a real training run with SIGKILL, resume it, and check it finishes where it should.

    python tools/kill_resume.py configs/mixco_r18_tiny_fast.py --nproc 1 --kill-at 250 \\
        --out results/kill_resume.json

Runs through tools/dist_train.sh (NCCL on a GPU, gloo CPU processes without one) on a generated
Tiny-ImageNet-format folder (--fake-images, default 20,000) or --data-root, then trains the same
config uninterrupted (--no-reference skips it) and compares the weights: required bit-identical
on CPU, reported on a GPU (cuDNN is not deterministic) beside the difference between two
uninterrupted runs. Exit 0: passed; 1: failed; 2: bad input.
"""
import json
import math
import os
import os.path as osp
import sys
import tempfile

from benchmark.atomic_io import atomic_write_text
from benchmark.cli import (ArgumentParser, config_line, existing_dir, fail, non_negative_int,
                           output_file, positive_int, run_tool)
from benchmark.engine.config.check import validate_config
from benchmark.engine.config_file import CfgOptionsAction
from benchmark.engine.launch import load_config


def parse_args(argv=None):
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('config', help='training config, e.g. configs/mixco_r18_tiny_fast.py')
    p.add_argument('--nproc', type=positive_int, default=1, help='processes (GPUs) per run')
    p.add_argument('--epochs', type=positive_int, default=2)
    p.add_argument('--kill-at', type=positive_int, required=True,
                   help='SIGKILL right after this iteration (1-based; rank 0)')
    p.add_argument('--iter-interval', type=positive_int,
                   help='save iter_<n>.pth every n iterations (default: kill-at // 2)')
    p.add_argument('--data-root', type=existing_dir,
                   help='a Tiny-ImageNet-format folder (default: generate one)')
    p.add_argument('--fake-images', type=positive_int, default=20000,
                   help='training images of the generated folder')
    p.add_argument('--work-dir', help='runs, logs and configs go here (default: a temp dir)')
    p.add_argument('--cfg-options', nargs='+', action=CfgOptionsAction, default={},
                   metavar='KEY=VALUE', help='override config keys in all three runs')
    p.add_argument('--no-reference', action='store_true',
                   help='skip the uninterrupted run (no weight comparison)')
    p.add_argument('--concurrent', action='store_true',
                   help='train the uninterrupted runs beside the killed one, not after it')
    p.add_argument('--timeout', type=non_negative_int, default=1800, help='seconds per run')
    p.add_argument('--keep-checkpoints', action='store_true',
                   help="leave the runs' checkpoints in the work dir (hundreds of MB each)")
    p.add_argument('--out', type=output_file, help='write the result as JSON here')
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:  # a bad config or option is one line before anything runs
        validate_config(load_config(args.config, args.cfg_options, None, 'none', None),
                        world_size=args.nproc)
    except (ValueError, OSError, TypeError, KeyError) as err:
        return fail(config_line(args.config, err))
    if args.work_dir and osp.isdir(args.work_dir) and os.listdir(args.work_dir):
        return fail(f'--work-dir {args.work_dir} is not empty (an old run there would be '
                    f'resumed): give a new or empty folder')
    from benchmark.data.fakes import make_fake_tiny_imagenet
    from benchmark.harness.faults.kill_resume import kill_and_resume
    work = args.work_dir or tempfile.mkdtemp(prefix='kill-resume-')
    data_root = args.data_root
    if data_root is None:
        classes = min(200, max(2, args.fake_images // 100))
        print(f'generating {args.fake_images} images in {work}/data ...', flush=True)
        data_root = str(make_fake_tiny_imagenet(
            osp.join(work, 'data'), num_classes=classes, val_per_class=2,
            train_per_class=math.ceil(args.fake_images / classes)))
    result = kill_and_resume(args.config, work, data_root=data_root, nproc=args.nproc,
                             epochs=args.epochs, kill_at=args.kill_at,
                             iter_interval=args.iter_interval or max(1, args.kill_at // 2),
                             options=args.cfg_options, reference=not args.no_reference,
                             concurrent=args.concurrent, timeout=args.timeout or None)
    result['work_dir'] = work
    if not args.keep_checkpoints:  # compared: the logs stay, the disk space goes back
        from benchmark.harness.faults.runs import remove_checkpoints
        remove_checkpoints(work)
    if args.out:  # replaced whole or not at all, as every results file of the suite
        atomic_write_text(args.out, json.dumps(result, indent=2) + '\n')
    cmp = result.get('comparison', {})
    print(f"{result['backend']} x{args.nproc} on {result['device']}: killed after iteration "
          f"{args.kill_at} (rc {result['killed_rc']}), resumed from {result['resumed_from_iter']}"
          f" (rc {result['resumed_rc']}), ended at {result.get('final_iter')}; "
          + (f"vs uninterrupted: identical={cmp['identical']}, max |diff| "
             f"{cmp['max_abs_diff']:.3g}" if cmp else 'no comparison')
          + (f"; two uninterrupted runs: max |diff| {result['noise_floor']['max_abs_diff']:.3g}"
             if 'noise_floor' in result else ''))
    for failure in result['failures']:
        print(f'FAILED: {failure}')
    print('kill-resume: ' + ('passed' if result['passed'] else 'FAILED') + f' (logs in {work})')
    return 0 if result['passed'] else 1


if __name__ == '__main__':
    sys.exit(run_tool(main))
