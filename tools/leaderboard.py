"""Render the leaderboard (Markdown + CSV) from the result records and the paper's numbers.

Examples:
    python tools/leaderboard.py                      # results/runs -> results/leaderboard.*
    python tools/leaderboard.py --results-dir /tmp/r # another results folder, same paper rows

The tables are generated, never edited: change or add records and rerun. Errors are one line
``error: ...`` on stderr with exit code 2 (``--debug`` for tracebacks).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import os
import sys
import warnings
from pathlib import Path

# The tools run as scripts, so the repository root is not on sys.path by default.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmark.leaderboard import build_rows, render_csv, render_markdown  # noqa: E402
from benchmark.report import load_records  # noqa: E402

PAPER_COLUMNS = ('table', 'arch', 'pretrain_epochs', 'pretrain_data', 'method', 'mixco',
                 'eval_data', 'protocol', 'top1')


def read_paper(path: Path) -> list[dict]:
    """Rows of the paper's results CSV, checked for the columns the leaderboard uses."""
    if not path.is_file():
        raise ValueError(f'paper results {path} not found; pass --paper CSV '
                         '(the repository has results/paper_results.csv)')
    with path.open(newline='', encoding='utf-8') as f:
        reader = csv.DictReader(f)
        missing = [c for c in PAPER_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f'paper results {path}: missing column(s) {", ".join(missing)}')
        return list(reader)


def _display(path: Path) -> str:
    """``path`` relative to the repository root where it lies inside it (as the docs name it)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` in one step so a reader never sees a half-written table."""
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    tmp.write_text(text, encoding='utf-8')
    os.replace(tmp, path)


def render(results_dir: Path, paper: Path | None) -> list[Path]:
    """Write ``leaderboard.md`` and ``leaderboard.csv`` into ``results_dir``; return the paths.

    Args:
        results_dir: The folder holding ``runs/*.json``.
        paper: The paper's results CSV, or None for no reference rows.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        records = load_records(str(results_dir))
    for warning in caught:  # a broken record must be visible, but must not stop the tables
        print(f'warning: {warning.message}', file=sys.stderr)
    rows = build_rows(records, read_paper(paper) if paper is not None else ())
    generated = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    results_dir.mkdir(parents=True, exist_ok=True)
    md, csv_path = results_dir / 'leaderboard.md', results_dir / 'leaderboard.csv'
    _write_atomic(md, render_markdown(rows, generated, f'{_display(results_dir)}/runs/*.json'))
    _write_atomic(csv_path, render_csv(rows))
    print(f'{len(records)} record(s), {len(rows)} row(s)')
    return [md, csv_path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--results-dir', default=str(ROOT / 'results'),
                        help='folder with runs/*.json; the tables are written here')
    parser.add_argument('--paper', default=str(ROOT / 'results' / 'paper_results.csv'),
                        help="the paper's numbers (CSV); 'none' for no reference rows")
    parser.add_argument('--debug', action='store_true', help='show tracebacks')
    args = parser.parse_args(argv)
    paper = None if args.paper.lower() == 'none' else Path(args.paper)
    try:
        paths = render(Path(args.results_dir), paper)
    except (ValueError, OSError) as err:
        if args.debug:
            raise
        print(f'error: leaderboard: {err}', file=sys.stderr)
        return 2
    for path in paths:
        print(f'wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
