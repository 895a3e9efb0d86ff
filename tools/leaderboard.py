"""Render the leaderboard (Markdown, CSV, explorer page) from the records and the paper's numbers.

Examples:
    python tools/leaderboard.py                      # results/runs -> results/leaderboard.*, index.html
    python tools/leaderboard.py --results-dir my_runs # another results folder, same paper rows

The tables are generated, never edited: change or add records and rerun. Errors are one line
``error: ...`` on stderr with exit code 2 (``--debug`` for tracebacks).
"""
from __future__ import annotations

import sys
from pathlib import Path

from benchmark.cli import ArgumentParser, existing_dir, existing_file, run_tool
from benchmark.layout import PAPER_RESULTS, REPO_ROOT, RESULTS_DIR
from benchmark.reports.render import render_leaderboard


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--results-dir', default=str(REPO_ROOT / RESULTS_DIR), type=existing_dir,
                        help='folder with runs/*.json; the tables are written here')
    parser.add_argument('--paper', default=str(PAPER_RESULTS),
                        type=lambda t: t if t.lower() == 'none' else existing_file(t),
                        help="the paper's numbers (CSV); 'none' for no reference rows")
    parser.add_argument('--debug', action='store_true', help='show tracebacks')
    args = parser.parse_args(argv)
    paper = None if args.paper.lower() == 'none' else Path(args.paper)
    try:
        paths = render_leaderboard(Path(args.results_dir), paper)
    except UnicodeError:  # the CSV reader's message does not name the file
        raise ValueError(f'--paper {paper}: not a UTF-8 text CSV file') from None
    for path in paths:
        print(f'wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
