"""Polars frames as text tables with tabulate: the CLI's plain tables and the UI's Markdown tables."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
from tabulate import tabulate


def frame_table(frame: pl.DataFrame, tablefmt: str, escape: Callable[[object], str], **formats: object) -> str:
    """``frame`` in tabulate's ``tablefmt``, the column names as headers. Numbers are right-aligned and
    formatted by tabulate (``formats``: ``floatfmt``, ``intfmt``, ``missingval``); every other cell is
    passed through ``escape`` before it is measured and is never read as a number."""
    text = [i for i, dtype in enumerate(frame.dtypes) if not dtype.is_numeric()]
    rows = [[escape(v) if i in text and v is not None else v for i, v in enumerate(row)] for row in frame.iter_rows()]
    return tabulate(rows, frame.columns, tablefmt=tablefmt, numalign="right", disable_numparse=text, **formats)


def markdown_escape(value: object) -> str:
    """A Markdown table cell's text: ``|`` escaped so that it does not end the cell."""
    return str(value).replace("|", "\\|")
