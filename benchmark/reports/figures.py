"""Figures on a page, each drawn on its own: one that cannot be drawn is left out with a note
where it would be (and a warning line), never stopping the tables or the other figures.

A page's figures are a dict {key: file name}; a figure that failed holds a `NotDrawn` (its
note) instead of a file name. `figure_lines` writes either; `drawn` lists the files.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Union


class NotDrawn(str):
    """The note standing where a figure that could not be drawn would be."""


def draw(what: str, path: Union[str, Path], plot: Callable[[], bool]) -> Union[bool, NotDrawn]:
    """``plot()`` (True: written to `path`, False: nothing to draw), or, where it raises, a
    `NotDrawn` note naming `what` and the error; `path` (half-written, or a stale figure of an
    earlier rendering) is then removed."""
    try:
        return plot()
    except Exception as err:  # noqa: BLE001 - a figure must never stop its page
        Path(path).unlink(missing_ok=True)
        message = str(err).strip().splitlines()
        note = NotDrawn(f'{what} was not drawn ({type(err).__name__}'
                        + (f': {message[0]}' if message else '') + ')')
        print(f'warning: {note}', file=sys.stderr)
        return note


def figure_lines(figures: Dict[str, str], key: str, alt: str) -> List[str]:
    """The Markdown of figure `key`: its image, its note where it was not drawn, or nothing."""
    value = (figures or {}).get(key)
    if isinstance(value, NotDrawn):
        return [f'_{value}._']
    return [f'![{alt}]({value})'] if value else []


def drawn(figures: Dict[str, str]) -> Iterable[str]:
    """The file names of the figures that were drawn."""
    return [name for name in figures.values() if not isinstance(name, NotDrawn)]
