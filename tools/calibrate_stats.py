"""Calibrate the leaderboard's statistics by simulation: false verdicts, interval coverage,
equivalence at the margin and power, through the real path (records -> rows -> verdicts).

Examples:
    python tools/calibrate_stats.py                               # print the table
    python tools/calibrate_stats.py --publish docs/evaluation.md  # and put it into the page

The page marks the table's place with the lines ``<!-- results: calibration -->`` and
``<!-- /results: calibration -->``. Errors are one line ``error: ...`` with exit code 2.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchmark.cli import ArgumentParser, run_tool
from benchmark.reports.calibration import calibration_table
from benchmark.suites.publish import check_page, publish

BLOCK = 'calibration'


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
        check_page(args.publish, BLOCK)
    table = calibration_table(args.reps)
    print(table, end='')
    if args.publish:
        with tempfile.TemporaryDirectory() as folder:
            summary = Path(folder) / 'calibration.md'
            summary.write_text(table, encoding='utf-8')
            for path in publish(args.publish, BLOCK, summary):
                print(f'wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
