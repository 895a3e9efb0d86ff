"""Calibrate the leaderboard's statistics by simulation: false verdicts, interval coverage,
equivalence at the margin and power, through the real path (records -> rows -> verdicts); and
the seeds-until-decided design's error rate and seeds against a fixed design.

Examples:
    python tools/calibrate_stats.py                               # print the table
    python tools/calibrate_stats.py --publish results/reference/studies.md  # into the page

The page marks the tables' places with the lines ``<!-- results: calibration -->`` and
``<!-- /results: calibration -->``, and ``<!-- results: sequential -->`` and
``<!-- /results: sequential -->``. Errors are one line ``error: ...`` with exit code 2.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchmark.cli import ArgumentParser, run_tool
from benchmark.reports.calibration import calibration_table
from benchmark.suites.publish import check_page, publish
from benchmark.suites.until_decided_sim import sequential_table

BLOCKS = ('calibration', 'sequential')


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--reps', type=int, default=400,
                        help='simulated suites per cell (default 400)')
    parser.add_argument('--publish', metavar='PAGE', help='put the table into this Markdown page')
    parser.add_argument('--debug', action='store_true', help='show tracebacks')
    args = parser.parse_args(argv)
    if args.reps < 10:
        raise ValueError(f'--reps {args.reps}: use at least 10 simulated suites per cell')
    if args.publish:
        for block in BLOCKS:
            check_page(args.publish, block)
    tables = dict(calibration=calibration_table(args.reps),
                  sequential=sequential_table(max(args.reps // 2, 10)))
    for block in BLOCKS:
        print(tables[block])
    if args.publish:
        with tempfile.TemporaryDirectory() as folder:
            for block in BLOCKS:
                summary = Path(folder) / f'{block}.md'
                summary.write_text(tables[block], encoding='utf-8')
                for path in publish(args.publish, block, summary):
                    print(f'wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
