"""Measure the MixCo family's cost over its baselines, the pipeline's and the loop's speed, kNN.

Default (about 2 min on 2 CPU cores):  python tools/benchmark_speed.py --out-dir results/speed
Steadier medians (2.5x as long):    python tools/benchmark_speed.py --full --out-dir results/speed
The paper's setting (a GPU):        python tools/benchmark_speed.py --paper --out-dir results/speed
Feature extraction alone:           python tools/benchmark_speed.py --only features --threads 2
Where a demo run's time goes:       python tools/benchmark_speed.py --only demo  (about 6 min)
The loop's own cost per iteration:  python tools/benchmark_speed.py --only loop
Runs on the GPU when one is present, else on the CPU. Variants run alternately (A B A B), medians
reported: the ratios hold while the machine's speed drifts. Each part ends with its time and the
ETA; Ctrl-C or SIGTERM stops it (130, 143), the parts measured kept in the outputs, marked partial.
"""
import argparse
import json
import sys
import traceback
from dataclasses import asdict, fields
from pathlib import Path

from benchmark import stop
from benchmark.atomic_io import atomic_write_text
from benchmark.cli import ArgumentParser, non_negative_int, output_dir, output_file, run_tool
from benchmark.harness.speed.bench import FULL, HEADLINE, NAMED_ONLY, PAPER, PARTS, run
from benchmark.harness.speed.pipeline import config_settings
from benchmark.harness.speed.report import markdown
from benchmark.harness.speed.timing import Settings


def parse_args(argv=None) -> argparse.Namespace:
    d = Settings()
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--paper', action='store_true', help='ResNet-18, 224 px, batch 128, 20,000 '
                   'images, one epoch per configuration of ' + ' '.join(PAPER['configs']))
    p.add_argument('--full', action='store_true', help=' '.join(f'{k}={v}' for k, v in FULL.items()))
    p.add_argument('--depth', type=int, choices=[18, 34, 50])
    p.add_argument('--input-size', type=int, help=f'pixels (default {d.input_size})')
    p.add_argument('--batch', type=int, help=f'images per step, per process ({d.batch})')
    p.add_argument('--small-stem', action='store_true', default=None, help='3x3 stem, no pool')
    p.add_argument('--images', type=int, help='training images of the generated folder '
                   '(default: what the parts need)')
    p.add_argument('--data-dir', help='keep the generated folder here and reuse it')
    p.add_argument('--configs', nargs='+', help='pipeline configurations '
                   'VIEWS-PRECISION[-cl][-compile][-graph], e.g. gpu-bf16-cl (default: the one of '
                   '--views/--precision/--channels-last)')
    p.add_argument('--repeats', type=int, help=f'timed steps per method ({d.repeats})')
    p.add_argument('--warmup', type=int, help=f'untimed steps per method ({d.warmup})')
    p.add_argument('--pipeline-rounds', type=int, help=f'Runner epochs per method and '
                   f'configuration, alternating ({d.pipeline_rounds})')
    p.add_argument('--pipeline-iters', type=int, help=f'timed iterations per epoch '
                   f'({d.pipeline_iters}; --paper: the whole epoch)')
    p.add_argument('--pipeline-warmup', type=int,
                   help=f'untimed iterations at the start of each epoch ({d.pipeline_warmup})')
    p.add_argument('--num-workers', type=non_negative_int,
                   help='dataloader workers (default: the config\'s)')
    p.add_argument('--threads', type=int, help='torch and faiss threads (1 on CPU; GPU: torch\'s)')
    for name in ('feature_images', 'feature_batch', 'views_native', 'views_repeats', 'demo_epochs',
                 'demo_rounds', *(f'knn_{n}' for n in ('bank', 'queries', 'dim', 'k', 'classes',
                                                       'chunk', 'repeats'))):
        p.add_argument(f'--{name.replace("_", "-")}', type=int, help=f'({getattr(d, name)})')
    p.add_argument('--precision', choices=['fp32', 'bf16'], default=d.precision,
                   help='bf16: autocast in the bare steps, CPUCapableAmpOptimWrapper in the Runner')
    p.add_argument('--channels-last', action='store_true', help='model and images in NHWC')
    p.add_argument('--views', choices=['pil', 'gpu', 'gpuc'], default=d.views,
                   help='pipeline views: PIL in the workers, or the GPU views override')
    p.add_argument('--profile', action='store_true', default=None, help='pipeline: one iteration profiled')
    p.add_argument('--skip', nargs='+', default=[], choices=PARTS, help='parts to leave out')
    p.add_argument('--only', nargs='+', choices=PARTS, help='the parts to run (e.g. views)')
    p.add_argument('--out-dir', type=output_dir,
                   help='write <device-slug>.json and .md here (results/speed)')
    p.add_argument('--out', type=output_file, help='write the results as JSON here')
    p.add_argument('--table', type=output_file, help='write the markdown table here')
    p.add_argument('--debug', action='store_true', help='show tracebacks of errors')
    return p.parse_args(argv)


def settings(args: argparse.Namespace) -> Settings:
    """Settings from the arguments: given values, else --paper's, else --full's, else the
    defaults; sizes and counts checked here, after they were filled (one line naming each bad
    one)."""
    d, preset = Settings(), {**(FULL if args.full else {}), **(PAPER if args.paper else {})}
    values = {}
    for f in fields(Settings):
        given = getattr(args, f.name, None)
        values[f.name] = given if given is not None else preset.get(f.name, getattr(d, f.name))
    skip = ([p for p in PARTS if p not in args.only] if args.only
            else [*args.skip, *(p for p in NAMED_ONLY if p not in args.skip)])
    s = Settings(**{**values, 'skip': tuple(skip), 'configs': tuple(values['configs']),
                    'paper': args.paper})
    for name in s.configs:
        config_settings(s, name)  # raises on a bad name
    counts = ('input_size', 'batch', 'repeats', 'pipeline_rounds', 'pipeline_iters',
              'feature_images', 'feature_batch', 'knn_bank', 'knn_queries', 'knn_dim', 'knn_k', 'knn_classes',
              'knn_chunk', 'knn_repeats', 'views_native', 'views_repeats', 'threads', 'images',
              'demo_epochs', 'demo_rounds')
    bad = [f'--{n.replace("_", "-")}={getattr(s, n)}' for n in counts
           if getattr(s, n) is not None and getattr(s, n) < 1]
    bad += [f'--{n.replace("_", "-")}={getattr(s, n)}' for n in ('warmup', 'pipeline_warmup')
            if getattr(s, n) < 0]
    if bad or s.batch % 2:
        raise ValueError(f'need positive sizes and counts, warmups >= 0 and an even batch '
                         f'(MixCo pairs its halves); got {" ".join(bad) or f"--batch={s.batch}"}')
    per_epoch = (s.images or 0) // s.batch
    if s.images and per_epoch < s.pipeline_warmup + (s.pipeline_iters or 2) + 1 + s.profile:
        raise ValueError(f'--images={s.images} gives {per_epoch} batches of {s.batch}; the '
                         f'pipeline needs --pipeline-warmup {s.pipeline_warmup} + '
                         f'{s.pipeline_iters or 2} timed + {1 + s.profile} more: raise --images')
    return s


def write(result: dict, s: Settings, args: argparse.Namespace) -> str:
    """The JSON and table files of a result (partial ones too), replaced atomically; the table."""
    result['settings'] = asdict(s)
    table = markdown(result, s)
    outs = [(args.out, args.table)]
    if args.out_dir:
        stem = Path(args.out_dir) / result['device_slug']
        outs.append((f'{stem}.json', f'{stem}.md'))
        Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    for out, md in outs:
        if out:
            atomic_write_text(out, json.dumps(result, indent=2) + '\n')
        if md:
            atomic_write_text(md, table)
    return table


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        s = settings(args)
        result = run(s, log=lambda msg: print(msg, file=sys.stderr, flush=True),
                     save=lambda partial: write(partial, s, args))
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        if stop.requested():  # a loader worker that a Ctrl-C ended first: the stop's line
            raise
        if args.debug:
            traceback.print_exc()
        print(f'error: benchmark_speed: {err}', file=sys.stderr)
        return 2
    print(write(result, s, args))
    for key in (k for k in HEADLINE if k in result):
        value = result[key]
        if isinstance(value, dict):  # e.g. compile_speedup per configuration
            value = ', '.join(f'{k} {v:.3f}' for k, v in value.items())
        print(f'{key}: {value:.3f}' if isinstance(value, float) else f'{key}: {value}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
