"""Compare a suite's records with its published reference, measure the seeds' spread, publish.

Examples:
    python tools/reference.py check results/suites/demo_digits results/reference/demo_digits
    python tools/reference.py spread results/reference/demo_digits/spread.json \\
        KIND_A/suites/demo_digits KIND_B/suites/demo_digits   # each folder from one CPU kind
    python tools/reference.py store results/suites/demo_digits results/reference/demo_digits

`check` prints the reproduction block (`make demo` ends with it): per method and metric the
published value and yours, equal bit for bit on the published CPU kind, elsewhere within the
seeds' spread or not. `store` makes a suite's folder the published reference (`make publish`).
Errors are one line ``error: ...`` on stderr with exit code 2 (``--debug`` for tracebacks).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from benchmark.atomic_io import atomic_write_text
from benchmark.cli import ArgumentParser, existing_dir, run_tool
from benchmark.reports.records import load_records
from benchmark.suites import reference as ref


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command', required=True)
    check = sub.add_parser('check', help='your records beside the published ones')
    check.add_argument('results', type=existing_dir, help="your suite's folder (runs/*.json)")
    check.add_argument('reference', type=existing_dir, help='the published reference folder')
    check.add_argument('--started', type=float, default=None,
                       help='when the demo started (seconds since the epoch): its time is '
                            'printed and kept for `store`')
    spread = sub.add_parser('spread', help="measure the seeds' spread over CPU kinds")
    spread.add_argument('out', help='the spread.json to write')
    spread.add_argument('folders', nargs='+', type=existing_dir,
                        help="suite folders (runs/*.json), each from one CPU kind")
    store = sub.add_parser('store', help='make a suite folder the published reference')
    store.add_argument('results', type=existing_dir)
    store.add_argument('reference')
    for each in (check, spread, store):
        each.add_argument('--debug', action='store_true', help='show tracebacks')
    args = parser.parse_args(argv)
    if args.command == 'check':
        records = load_records(args.results)
        if not records:
            raise FileNotFoundError(f'{args.results}/runs: no records; run the suite first')
        if args.started is not None:
            timing = ref.record_timing(Path(args.results), args.started, time.time(), records)
            print(f"The demo took {timing['seconds'] / 60:.1f} min on {timing['kind']} "
                  + (f"({timing['runs']} run(s) trained or evaluated now)." if timing['runs'] else
                     '(every run had its record: rendered only).'))
        rows, sides = ref.compare(records, load_records(args.reference),
                                  ref.load_spread(Path(args.reference)))
        print('\n'.join(ref.check_lines(rows, sides, args.reference)))
        return 0
    if args.command == 'spread':
        kinds: dict = {}
        for folder in args.folders:
            for record in load_records(folder):
                kinds.setdefault(ref.kind(record), []).append(record)
        if len(kinds) < 2:
            raise ValueError(f'spread: the folders hold records of {len(kinds)} CPU kind(s); '
                             'give folders from at least two')
        atomic_write_text(args.out, json.dumps(ref.measure_spread(kinds), indent=1) + '\n')
        print(f'wrote {args.out}')
        return 0
    for path in ref.store(Path(args.results), Path(args.reference)):
        print(f'wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
