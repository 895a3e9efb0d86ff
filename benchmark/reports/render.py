"""Write a results folder's leaderboard (Markdown + CSV) from its records and the paper's CSV."""
from __future__ import annotations

import csv
import datetime
import sys
import warnings
from pathlib import Path
from typing import List, Optional

from benchmark.atomic_io import atomic_write_text
from benchmark.layout import display_path, leaderboard_paths
from benchmark.reports.aggregate_board import across_sections, aggregate_figures
from benchmark.reports.explorer import render_explorer
from benchmark.reports.figures import drawn
from benchmark.reports.interval_plot import section_figures
from benchmark.reports.leaderboard import build_rows
from benchmark.reports.tables import render_csv, render_markdown
from benchmark.reports.verdicts import verdicts
from benchmark.reports.records import load_records

PAPER_COLUMNS = ('table', 'arch', 'pretrain_epochs', 'pretrain_data', 'method', 'mixco',
                 'eval_data', 'protocol', 'top1')


def read_paper(path: Path) -> List[dict]:
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


def render_leaderboard(results_dir: Path, paper: Optional[Path]) -> List[Path]:
    """Write ``leaderboard.md``, ``leaderboard.csv``, the explorer ``index.html``, the interval
    plots (one PNG per section) and the aggregates' figures (performance profile, ranks) into
    ``results_dir``; return the paths.

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
    md, csv_path = leaderboard_paths(str(results_dir))
    figures = {**section_figures(rows, str(results_dir)),
               **aggregate_figures(rows, str(results_dir))}
    atomic_write_text(str(md), render_markdown(rows, generated, f'{display_path(results_dir)}/runs/*.json',
                                               figures=figures, verdicts=verdicts(rows),
                                               across=across_sections(rows)))
    csv_text = render_csv(rows)
    atomic_write_text(str(csv_path), csv_text)
    explorer = render_explorer(rows, csv_text, results_dir, [str(results_dir)], 'Leaderboard',
                               generated)
    print(f'{len(records)} record(s), {len(rows)} row(s)')
    return [md, csv_path, explorer] + [results_dir / name for name in drawn(figures)]
