"""The Jinja environment of the report and the charts (``templates/``) and its formatting filters."""

from __future__ import annotations

import functools
import math
from collections import namedtuple
from html import escape
from typing import Any

import polars as pl
from jinja2 import Environment, PackageLoader
from markupsafe import Markup

from arena_pipeline.core.categories import category_label
from arena_pipeline.core.ranking import method_label
from arena_pipeline.presentation.read import when


def is_num(value: Any) -> bool:
    """True for an int or a float that is not NaN."""
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


def slug(text: str) -> str:
    """``text`` as an id fragment: lower-case letters and digits, the rest '-'."""
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "x"


def _rows(frame: pl.DataFrame):
    """A frame's rows as named tuples (attribute access in templates, no dict look-up fallback)."""
    return map(_row_type(tuple(frame.columns))._make, frame.iter_rows())


@functools.cache
def _row_type(columns: tuple[str, ...]) -> type:
    return namedtuple("Row", columns, rename=True)


def _ci(r: Any) -> str:
    lo, hi, rating = r.ci_lower, r.ci_upper, r.rating
    return f"+{hi - rating:.1f} / −{rating - lo:.1f}" if all(map(is_num, (lo, hi, rating))) else "–"


def _half_width(r: Any) -> float | None:
    lo, hi = r.ci_lower, r.ci_upper
    return (hi - lo) / 2 if is_num(lo) and is_num(hi) else None


def _td(shown: Any, value: Any = None) -> Markup:
    """A numeric cell; ``value`` (sort key) in ``data-value``."""
    data = "" if value is None else f' data-value="{escape(str(value))}"'
    return Markup(f'<td class="num"{data}>{escape(str(shown))}</td>')


def _int(value: Any) -> str:
    return f"{value:,d}" if isinstance(value, int) else "–"


def _record(r: Any) -> str:
    return f"{_int(r.wins)} / {_int(r.losses)} / {_int(r.ties)}"


def _model_cell(name: str, model_ids: dict[str, str]) -> Markup:
    """A row header with the model's name, linked to its panel when it has one."""
    shown = escape(name)
    inner = f'<a class="model-link" href="#{model_ids[name]}">{shown}</a>' if name in model_ids else shown
    return Markup(f'<th scope="row" data-value="{shown}">{inner}</th>')


def coef(value: Any) -> str:
    """A coefficient to 3 decimals, or '–'."""
    return f"{value:.3f}" if is_num(value) else "–"


def interval(lower: Any, upper: Any) -> str:
    """``[lower, upper]`` to 3 decimals, or '–' without both ends."""
    return f"[{coef(lower)}, {coef(upper)}]" if is_num(lower) and is_num(upper) else "–"


@functools.cache
def environment() -> Environment:
    """The templates' environment (autoescaped), with the filters they format numbers and names with."""
    env = Environment(loader=PackageLoader("arena_pipeline.presentation", "templates"), autoescape=True)
    env.filters.update(
        num=lambda v, digits=1: f"{v:,.{digits}f}" if is_num(v) else "–",
        int_=_int, td=_td, rows=_rows, record=_record, model_cell=_model_cell,
        pct=lambda v: f"{v:.1%}" if is_num(v) else "–", coef=coef,
        isnum=is_num, ci=_ci, half_width=_half_width, when=when, slug=slug, label=category_label,
        method_label=method_label,
    )
    return env
