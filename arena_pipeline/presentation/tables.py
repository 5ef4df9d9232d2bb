"""Rows and Polars frames as text tables with tabulate: the CLI's plain tables and the UI's Markdown tables."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from tabulate import tabulate

if TYPE_CHECKING:  # the CLI's leaderboard renders rows without importing Polars
    import polars as pl


def rows_table(columns: Sequence[str], rows: Sequence[Sequence[object]], text: Collection[int], tablefmt: str,
               escape: Callable[[object], str], **formats: object) -> str:
    """``rows`` in tabulate's ``tablefmt``, ``columns`` as headers. Numbers are right-aligned and formatted
    by tabulate (``formats``: ``floatfmt``, ``intfmt``, ``missingval``); every cell of a ``text`` column
    (indices) is passed through ``escape`` before it is measured and is never read as a number."""
    text = sorted(text)
    cells = [[escape(v) if i in text and v is not None else v for i, v in enumerate(row)] for row in rows]
    return tabulate(cells, list(columns), tablefmt=tablefmt, numalign="right", disable_numparse=text, **formats)


def frame_table(frame: pl.DataFrame, tablefmt: str, escape: Callable[[object], str], **formats: object) -> str:
    """:func:`rows_table` of ``frame``: its column names as headers, its non-numeric columns as text."""
    text = [i for i, dtype in enumerate(frame.dtypes) if not dtype.is_numeric()]
    return rows_table(frame.columns, list(frame.iter_rows()), text, tablefmt, escape, **formats)


def markdown_escape(value: object) -> str:
    """A Markdown table cell's text: ``|`` escaped so that it does not end the cell."""
    return str(value).replace("|", "\\|")
