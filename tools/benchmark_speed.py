"""Measure MixCo's cost against MoCo-v2 and SimCLR, the pipeline's efficiency and kNN speed.

Default (minutes on two CPU cores): python tools/benchmark_speed.py --out s.json --table s.md
The paper's setting (a GPU):        python tools/benchmark_speed.py --paper --out speed.json
Runs on the GPU when one is present, else on the CPU. Variants are measured alternately (A B A B)
and medians reported, so the ratios hold even while the machine's speed drifts.
"""
import argparse
import json
import os
import sys
import traceback
from dataclasses import asdict, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
os.environ.setdefault('KINETO_LOG_LEVEL', '5')  # before torch: silence the profiler's log lines

from benchmark.harness.speed import HEADLINE, Settings, markdown, run  # noqa: E402

PARTS = ('step', 'pipeline', 'features', 'knn')


def parse_args(argv=None) -> argparse.Namespace:
    d = Settings()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--depth', type=int, default=d.depth, choices=[18, 34, 50])
    p.add_argument('--input-size', type=int, default=d.input_size, help='pixels')
    p.add_argument('--batch', type=int, default=d.batch, help='images per step (per process)')
    p.add_argument('--small-stem', action='store_true', help='3x3 stem, no max-pool')
    p.add_argument('--paper', action='store_true',
                   help='the paper\'s setting: ResNet-18, 224 px, batch 64 per process')
    p.add_argument('--repeats', type=int, default=d.repeats, help='timed steps per method')
    p.add_argument('--warmup', type=int, default=d.warmup, help='untimed steps per method')
    p.add_argument('--pipeline-rounds', type=int, default=d.pipeline_rounds,
                   help='Runner epochs per method, alternating')
    p.add_argument('--pipeline-iters', type=int, default=d.pipeline_iters,
                   help='timed iterations per epoch')
    p.add_argument('--pipeline-warmup', type=int, default=d.pipeline_warmup,
                   help='untimed iterations at the start of each epoch')
    p.add_argument('--num-workers', type=int, default=None,
                   help='dataloader workers of the pipeline (default: the config\'s)')
    p.add_argument('--threads', type=int, default=None,
                   help='torch and faiss threads (default: 1 on CPU, robust to other load on '
                   'the cores; torch\'s default on GPU)')
    p.add_argument('--feature-images', type=int, default=d.feature_images)
    for name in ('bank', 'queries', 'dim', 'k', 'classes', 'chunk', 'repeats'):
        p.add_argument(f'--knn-{name}', type=int, default=getattr(d, f'knn_{name}'))
    p.add_argument('--precision', choices=['fp32', 'bf16'], default=d.precision,
                   help='bf16: autocast in the bare steps, CPUCapableAmpOptimWrapper in the Runner')
    p.add_argument('--channels-last', action='store_true', help='model and images in NHWC')
    p.add_argument('--views', choices=['pil', 'gpu'], default=d.views,
                   help='pipeline views: PIL in the workers, or the GPU views override')
    p.add_argument('--skip', nargs='+', default=[], choices=PARTS, help='parts to leave out')
    p.add_argument('--out', help='write the results as JSON here')
    p.add_argument('--table', help='write the markdown table here')
    p.add_argument('--debug', action='store_true', help='show tracebacks of errors')
    return p.parse_args(argv)


def settings(args: argparse.Namespace) -> Settings:
    """Settings from the arguments; --paper overrides backbone, input size and batch."""
    if args.paper:
        args.depth, args.input_size, args.batch, args.small_stem = 18, 224, 64, False
    values = {f.name: getattr(args, f.name) for f in fields(Settings) if f.name != 'skip'}
    s = Settings(**values, skip=tuple(args.skip))
    positive = {n: getattr(s, n) for n in ('input_size', 'batch', 'repeats', 'pipeline_rounds',
                                           'pipeline_iters', 'pipeline_warmup', 'feature_images',
                                           'knn_bank', 'knn_queries', 'knn_dim', 'knn_k',
                                           'knn_classes', 'knn_chunk', 'knn_repeats')}
    bad = [f'--{n.replace("_", "-")}={v}' for n, v in positive.items() if v < 1]
    bad += [f'--threads={s.threads}'] if s.threads is not None and s.threads < 1 else []
    if bad or s.warmup < 0 or s.batch % 2:
        raise ValueError(f'need positive sizes and counts, warmup >= 0 and an even batch '
                         f'(MixCo pairs its halves); got {" ".join(bad) or f"--batch={s.batch}"}')
    return s


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        s = settings(args)
        result = run(s, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        if args.debug:
            traceback.print_exc()
        print(f'error: benchmark_speed: {err}', file=sys.stderr)
        return 2
    result['settings'] = asdict(s)
    table = markdown(result, s)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + '\n')
    if args.table:
        Path(args.table).write_text(table)
    print(table)
    for key in HEADLINE:
        if key in result:
            value = result[key]
            print(f'{key}: {value:.3f}' if isinstance(value, float) else f'{key}: {value}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
