"""The plausible range of numbers read from files made elsewhere: benchmark scores, published boards.

One bound for both: a magnitude of at most :data:`MAX_ABS_VALUE` (1e6). Benchmark scales (fractions,
percentages, Elo-style ratings, counts of problems) and LMArena's ratings (about 800 to 1,600) stay far
below it; every number within it can be drawn by the report's charts and moved by an alignment shift
without leaving the float range, where ``1.7e308 + 1.7e308`` is ``inf``. A number outside it is a broken
file (or another unit), refused with the file's name rather than carried to a board.
"""

from __future__ import annotations

import math

import polars as pl

#: The largest magnitude of a plausible number (see the module's docstring).
MAX_ABS_VALUE = 1e6


def implausible_expr(number: pl.Expr, limit: float = MAX_ABS_VALUE) -> pl.Expr:
    """True where ``number`` (a Float64 expression) is finite and larger in magnitude than ``limit``.

    Non-finite numbers (inf, NaN) are refused on their own, with their own message, by the readers;
    null stays null.
    """
    return number.is_finite() & (number.abs() > limit)


def plausible(value: float | None, limit: float = MAX_ABS_VALUE) -> bool:
    """Whether ``value`` is a finite number of magnitude at most ``limit`` (None is not)."""
    return value is not None and math.isfinite(value) and abs(value) <= limit


def range_text(limit: float = MAX_ABS_VALUE) -> str:
    """``between -1,000,000 and 1,000,000``: the range in the readers' messages."""
    return f"between {-limit:,.0f} and {limit:,.0f}"
