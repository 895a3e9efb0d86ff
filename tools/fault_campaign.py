"""Run the fault campaign on CPU with tiny settings and print the scorecard.

    python tools/fault_campaign.py [--out DIR] [--seed 0] [--quick]

Kills (SIGKILL at random iterations, right after saves, during evaluation, one of two
processes), kills during checkpoint writes (max_keep_ckpts 1 and unlimited), SIGTERM/SIGUSR1
pre-emption, stops by every signal to every part of a job each followed at once by a resume,
a NaN, dead and hung processes, malformed configs, a folder of bad images and concurrent
result writers. Takes about 30-40 minutes on a 2-core CPU (--quick: a few; --only: some
sections).
"""
import os.path as osp
import random
import sys
import tempfile
import time

from benchmark.harness.faults import campaign as fc
from benchmark.harness.faults import stops
from benchmark.data.fakes import make_fake_tiny_imagenet
from benchmark import stop
from benchmark.cli import ArgumentParser, non_negative_int, output_dir, run_tool


SECTIONS = ('kills', 'save-kills', 'preemption', 'stops', 'nan', 'dead', 'configs', 'bad-data',
            'records')


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', type=output_dir,
                        help='keep the runs here (default: a temporary folder)')
    parser.add_argument('--seed', type=non_negative_int, default=0, help='seed of the kill points')
    parser.add_argument('--keep-checkpoints', action='store_true',
                        help='leave the runs\' checkpoints on disk (GBs)')
    parser.add_argument('--quick', action='store_true',
                        help='one kill per method, 3 save kills per setting, 8 of the stops')
    parser.add_argument('--only', nargs='+', choices=SECTIONS, metavar='SECTION',
                        help=f"run these sections only: {', '.join(SECTIONS)}")
    args = parser.parse_args(argv)
    tmp = args.out or tempfile.mkdtemp(prefix='fault-campaign-')
    rng = random.Random(args.seed)
    data = str(make_fake_tiny_imagenet(osp.join(tmp, 'data'), num_classes=4, train_per_class=8,
                                       val_per_class=2))
    card = fc.Scorecard()
    start = time.monotonic()
    every = stops.scenarios()
    sections = {
        'kills': ('SIGKILL at random iterations, then --resume', lambda: fc.section_kills(
            card, tmp, data, rng, kills_per_method=1 if args.quick else 3)),
        'save-kills': ('SIGKILL during checkpoint writes', lambda: fc.section_save_kills(
            card, tmp, data, rng, kills=3 if args.quick else 10)),
        'preemption': ('pre-emption signals', lambda: fc.section_preemption(card, tmp, data)),
        'stops': ('a signal to a part of the job, then --resume at once', lambda: stops.section_stops(
            card, tmp, data, rng, rng.sample(every, 8) if args.quick else every,
            log=lambda line: print(line, flush=True), workers=2)),
        'nan': ('non-finite loss', lambda: fc.section_nan(card, tmp, data)),
        'dead': ('dead and hung processes', lambda: fc.section_dead_rank(card, tmp, data)),
        'configs': ('malformed configs', lambda: fc.section_configs(card, data)),
        'bad-data': ('bad image files', lambda: fc.section_bad_data(card, tmp)),
        'records': ('concurrent result writers', lambda: fc.section_records(card, tmp)),
    }
    stop.plan(args.only or SECTIONS)  # Ctrl-C's line names the sections run and not run
    for key in args.only or SECTIONS:
        title, run = sections[key]
        print(f'{title}:', flush=True)
        run()
        stop.finished(key)
    print(f'\nfault campaign scorecard (seed {args.seed}, {time.monotonic() - start:.0f} s, '
          f'runs in {tmp}):')
    for line in card.lines():
        print(f'  {line}')
    for failure in card.failures:
        print(f'  FAILED: {failure}')
    if not args.keep_checkpoints:
        fc.remove_checkpoints(tmp)  # GBs of them; the logs and configs stay
    clean = (not card.failures and card.faults_injected == card.faults_survived
             and card.checkpoints_corrupt == 0 and card.rows_lost == 0
             and card.bad_inputs_tried == card.bad_inputs_rejected)
    return 0 if clean else 1


if __name__ == '__main__':
    sys.exit(run_tool(main))
