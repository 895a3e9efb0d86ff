"""Run the fault campaign on CPU with tiny settings and print the scorecard.

    python tools/fault_campaign.py [--out DIR] [--seed 0] [--quick]

Kills (SIGKILL at random iterations, right after saves, during evaluation, one of two
processes), kills during checkpoint writes (max_keep_ckpts 1 and unlimited), SIGTERM/SIGUSR1
pre-emption, a NaN, dead and hung processes, malformed configs, a folder of bad images and
concurrent result writers. Takes about 20-30 minutes on a 2-core CPU (--quick: a few).
"""
import os.path as osp
import random
import sys
import tempfile
import time

from benchmark.harness.faults import campaign as fc
from benchmark.data.fakes import make_fake_tiny_imagenet
from benchmark.cli import ArgumentParser, non_negative_int, output_dir, run_tool


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', type=output_dir,
                        help='keep the runs here (default: a temporary folder)')
    parser.add_argument('--seed', type=non_negative_int, default=0, help='seed of the kill points')
    parser.add_argument('--keep-checkpoints', action='store_true',
                        help='leave the runs\' checkpoints on disk (GBs)')
    parser.add_argument('--quick', action='store_true',
                        help='one kill per method, 3 save kills per setting')
    args = parser.parse_args(argv)
    tmp = args.out or tempfile.mkdtemp(prefix='fault-campaign-')
    rng = random.Random(args.seed)
    data = str(make_fake_tiny_imagenet(osp.join(tmp, 'data'), num_classes=4, train_per_class=8,
                                       val_per_class=2))
    card = fc.Scorecard()
    start = time.monotonic()
    sections = [
        ('SIGKILL at random iterations, then --resume', lambda: fc.section_kills(
            card, tmp, data, rng, kills_per_method=1 if args.quick else 3)),
        ('SIGKILL during checkpoint writes', lambda: fc.section_save_kills(
            card, tmp, data, rng, kills=3 if args.quick else 10)),
        ('pre-emption signals', lambda: fc.section_preemption(card, tmp, data)),
        ('non-finite loss', lambda: fc.section_nan(card, tmp, data)),
        ('dead and hung processes', lambda: fc.section_dead_rank(card, tmp, data)),
        ('malformed configs', lambda: fc.section_configs(card, data)),
        ('bad image files', lambda: fc.section_bad_data(card, tmp)),
        ('concurrent result writers', lambda: fc.section_records(card, tmp)),
    ]
    for title, run in sections:
        print(f'{title}:', flush=True)
        run()
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
