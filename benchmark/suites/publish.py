"""Put a suite's generated summary into a Markdown page (``tools/run_suite.py --publish PAGE``).

The page marks where the results go with two lines::

    <!-- results: demo_digits -->
    ...replaced on every publish...
    <!-- /results: demo_digits -->

Between them goes the suite's ``summary.md`` (tables, verdicts, interval plot), its figures
copied to ``<page folder>/figures/<suite>_<name>`` (for a page at the repository's root, such as
README.md: ``docs/figures/``) and linked from there. Everything between the
markers is generated: edits there are lost on the next publish. The markers are checked before
the suite runs, so a page without them fails in one line before any work starts.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import List

from benchmark.atomic_io import atomic_write_text
from benchmark.layout import REPO_ROOT

FIGURES = 'figures'


def markers(suite: str) -> tuple:
    """The opening and closing marker lines of `suite`'s block."""
    return f'<!-- results: {suite} -->', f'<!-- /results: {suite} -->'


def check_page(page: str, suite: str) -> None:
    """Raise a one-line ValueError unless `page` holds `suite`'s two markers once each, in
    order."""
    begin, end = markers(suite)
    path = Path(page)
    if not path.is_file():
        raise ValueError(f'--publish {page}: no such file; pass a Markdown page holding the '
                         f'lines {begin} and {end}')
    lines = [line.strip() for line in path.read_text(encoding='utf-8').splitlines()]
    if lines.count(begin) != 1 or lines.count(end) != 1 or lines.index(begin) > lines.index(end):
        raise ValueError(f'--publish {page}: needs the line {begin} and, below it, {end} (once '
                         'each) around where the results go')


def figures_dir(page: Path) -> Path:
    """Where a page's published figures go: figures/ beside it; docs/figures/ for a page at the
    repository's root."""
    if page.resolve().parent == REPO_ROOT:
        return REPO_ROOT / 'docs' / FIGURES
    return page.parent / FIGURES


def publish(page: str, suite: str, summary: Path) -> List[Path]:
    """Replace `suite`'s block in `page` with `summary` (its figures copied beside the page);
    return the files written."""
    check_page(page, suite)
    page_path = Path(page)
    text = summary.read_text(encoding='utf-8')
    written = []
    folder = figures_dir(page_path)

    def relink(match: re.Match) -> str:
        name = match.group(2)
        source = summary.parent / name
        if '/' in name or not source.is_file():
            return match.group(0)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f'{suite}_{name}'
        shutil.copyfile(source, target)
        written.append(target)
        return f'{match.group(1)}({os.path.relpath(target, page_path.parent)})'

    text = re.sub(r'(!\[[^\]]*\])\(([^)\s]+)\)', relink, text)
    begin, end = markers(suite)
    lines = page_path.read_text(encoding='utf-8').splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == begin][0]
    stops = [i for i, line in enumerate(lines) if line.strip() == end][0]
    new = lines[:starts + 1] + [text.rstrip('\n')] + lines[stops:]
    atomic_write_text(str(page_path), '\n'.join(new) + '\n')
    return [page_path] + written
