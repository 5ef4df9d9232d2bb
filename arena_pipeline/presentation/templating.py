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

from arena_pipeline.core.changes.changes import board_shift
from arena_pipeline.core.dataset.categories import category_label
from arena_pipeline.core.labels import PRIMARY_METHOD, STYLE_METHODS, method_note, rank_label, rank_set_label
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


def is_finite(value: Any) -> bool:
    """True for an int or a float that is neither NaN nor infinite."""
    return is_num(value) and math.isfinite(value)


def interval_note(lower: Any, upper: Any, ci_method: Any = None) -> str | None:
    """Why a rating's interval is not drawn as two numbers, or None when it is.

    ``"reference"``: the board's reference model, whose rating is pinned (an interval is of a
    rating's difference from the reference, so it has none; ``ci_method`` names the board's
    interval, its bounds are missing); ``"unbounded"``: an infinite bound (a clustered interval of
    a model seen in one session only); ``"–"``: no interval on this board.
    """
    if is_finite(lower) and is_finite(upper):
        return None
    if is_num(lower) or is_num(upper):
        return "unbounded"
    return "reference" if ci_method not in (None, "none") else "–"


def _ci(r: Any) -> str:
    lo, hi, rating = r.ci_lower, r.ci_upper, r.rating
    note = interval_note(lo, hi, getattr(r, "ci_method", None))
    return note if note or not is_num(rating) else f"+{hi - rating:.1f} / −{rating - lo:.1f}"


def _half_width(r: Any) -> float | None:
    """The interval's half-width (the sort key of the 95% CI column): 0 for the reference model, whose
    rating is exact by definition; None without a finite interval."""
    lo, hi = r.ci_lower, r.ci_upper
    if is_finite(lo) and is_finite(hi):
        return (hi - lo) / 2
    return 0.0 if interval_note(lo, hi, getattr(r, "ci_method", None)) == "reference" else None


def _td(shown: Any, value: Any = None) -> Markup:
    """A numeric cell; ``value`` (sort key) in ``data-value``."""
    data = "" if value is None else f' data-value="{escape(str(value))}"'
    return Markup(f'<td class="num"{data}>{escape(str(shown))}</td>')


def _int(value: Any) -> str:
    return f"{value:,d}" if isinstance(value, int) else "–"


def _rank_set(r: Any, best: str, worst: str) -> str:
    """A row's rank set from its ``best`` and ``worst`` columns (``core.labels.rank_set_label``)."""
    return rank_set_label(getattr(r, best, None), getattr(r, worst, None))


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


def ci_title(lower: Any, upper: Any, ci_method: Any = None) -> str:
    """A rating's interval in words for a chart's tooltip: ``95% CI [lower, upper]`` or why there is none."""
    note = interval_note(lower, upper, ci_method)
    if note is None:
        return f"95% CI [{lower:,.1f}, {upper:,.1f}]"
    return {"reference": "reference model: rating pinned, no interval", "unbounded": "95% CI unbounded"}.get(
        note, "no interval")


def interval(lower: Any, upper: Any) -> str:
    """``[lower, upper]`` to 3 decimals, or '–' without both ends."""
    return f"[{coef(lower)}, {coef(upper)}]" if is_num(lower) and is_num(upper) else "–"


@functools.cache
def environment() -> Environment:
    """The templates' environment (autoescaped), with the filters they format numbers and names with and the
    methods by role (``primary_method``, ``style_methods``)."""
    env = Environment(loader=PackageLoader("arena_pipeline.presentation", "templates"), autoescape=True)
    env.filters.update(
        num=lambda v, digits=1: f"{v:,.{digits}f}" if is_num(v) else "–",
        int_=_int, td=_td, rows=_rows, record=_record, rank_set=_rank_set, model_cell=_model_cell,
        pct=lambda v: f"{v:.1%}" if is_num(v) else "–", coef=coef,
        isnum=is_num, isfinite=is_finite, ci=_ci, half_width=_half_width, when=when, slug=slug, label=category_label,
        method_label=method_label, method_note=method_note, rank_label=rank_label,
        board_shift=board_shift,
    )
    # the methods by role (``core.labels``): the templates name no method
    env.globals.update(primary_method=PRIMARY_METHOD, style_methods=STYLE_METHODS)
    return env
