"""The static report: ``templates/report.html.j2`` rendered with its CSS and JS inlined (one offline file)."""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
from collections import namedtuple
from html import escape
from importlib.resources import files
from pathlib import Path
from typing import Any

import polars as pl
from jinja2 import Environment, PackageLoader
from markupsafe import Markup

from arena_pipeline.constants import DEFAULT_REPORT_PATH as _DEFAULT
from arena_pipeline.core.atomic import write_text_atomic
from arena_pipeline.core.benchmarks import MIN_MODELS
from arena_pipeline.core.categories import RULES_BY_NAME, category_label
from arena_pipeline.presentation.charts import (
    benchmark_scatter_svg,
    heatmap_svg,
    is_num,
    profile_chart_svg,
    rating_chart_svg,
    slug,
)
from arena_pipeline.presentation.read import METHOD_LABELS, Published, when

DEFAULT_REPORT_PATH = Path(_DEFAULT)
FEATURE_LABELS = {"tokens": "Answer length (tokens)", "headers": "Markdown headers", "lists": "List items",
                  "bold": "Bold spans"}


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


def _coef(value: Any) -> str:
    return f"{value:.3f}" if is_num(value) else "–"


def _interval(lower: Any, upper: Any) -> str:
    return f"[{_coef(lower)}, {_coef(upper)}]" if is_num(lower) and is_num(upper) else "–"


def _figures(r: Any) -> str:
    """An agreement row in words (a scatter's caption and description)."""
    head = f"{r.n_matched} matched model{'s' if r.n_matched != 1 else ''}"
    if r.spearman is None:
        return f"{head}; {r.note}" if r.note else head
    return (f"{head}; Spearman {_coef(r.spearman)} {_interval(r.spearman_lower, r.spearman_upper)}, "
            f"Kendall {_coef(r.kendall)} {_interval(r.kendall_lower, r.kendall_upper)}"
            + (f"; {r.note}" if r.note else ""))


def _svg(function):
    return lambda *args, **kwargs: Markup(function(*args, **kwargs))


@functools.cache
def _environment() -> Environment:
    env = Environment(loader=PackageLoader("arena_pipeline.presentation", "templates"), autoescape=True)
    env.filters.update(
        num=lambda v, digits=1: f"{v:,.{digits}f}" if is_num(v) else "–",
        int_=_int, td=_td, rows=_rows, record=_record, model_cell=_model_cell,
        pct=lambda v: f"{v:.1%}" if is_num(v) else "–", coef=_coef,
        isnum=is_num, ci=_ci, half_width=_half_width, when=when, slug=slug, label=category_label,
        method_label=lambda m: METHOD_LABELS.get(m, m),
    )
    env.globals.update(rating_chart=_svg(rating_chart_svg), heatmap=_svg(heatmap_svg),
                       profile_chart=_svg(profile_chart_svg), col=pl.col, rules=RULES_BY_NAME,
                       benchmark_scatter=_svg(benchmark_scatter_svg), interval=_interval, figures=_figures,
                       min_models=MIN_MODELS,
                       features=FEATURE_LABELS,
                       chart_methods=lambda methods, primary: [m for m in ("bt", "bt_style") if m in methods]
                       or [primary])
    return env


def _static(name: str) -> Markup:
    return Markup((files("arena_pipeline.presentation") / "templates" / name).read_text(encoding="utf-8"))


def _dump_fields(dump: dict[str, Any]) -> list[tuple[str, Any]]:
    files_ = dump.get("files")
    if isinstance(files_, str):
        try:
            files_ = json.loads(files_)
        except ValueError:
            files_ = None
    rows = dump.get("rows")
    return [("Revision", Markup("<code>%s</code>") % dump["revision"] if dump.get("revision") else None),
            ("Source", dump.get("source")), ("Source kind", dump.get("source_kind")),
            ("Requested revision", dump.get("requested_revision")),
            ("Rows", f"{rows:,d}" if isinstance(rows, int) else None),
            ("Files", len(files_) if isinstance(files_, list) else None), ("Status", dump.get("status")),
            ("First seen", when(dump.get("first_seen"))), ("Published at", when(dump.get("published_at")))]


def build_report_html(pub: Published, *, title: str = "LMArena leaderboards", heatmap_models: int = 20,
                      generated_at: dt.datetime | None = None) -> str:
    """The report page as a string; see :func:`render_report`."""
    if pub.leaderboard.height == 0:
        raise ValueError("the leaderboard is empty: nothing to report")
    dump = dict(pub.dump or {})
    model_ids = {m: f"model-{i}" for i, m in enumerate(pub.models())}
    return _environment().get_template("report.html.j2").render(
        pub=pub, title=title, heatmap_models=heatmap_models, categories=pub.categories(), dump=dump,
        dump_fields=_dump_fields({**dump, "revision": pub.revision}) if dump or pub.revision else [],
        no_board=pub.no_board(),
        model_ids=model_ids,
        generated=(generated_at or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC"),
        css=_static("report.css"), js=_static("report.js"),
    )


def render_report(pub: Published, out_path: str | os.PathLike[str] = DEFAULT_REPORT_PATH, **options: Any) -> Path:
    """Write the published leaderboards as one self-contained, offline HTML file.

    Per category (a tab each, board order): the primary board (``bt``) with provisional models in a
    table of their own, the other boards collapsed, a rating chart with 95% intervals (``bt`` and
    ``bt_style``), raw vs style-controlled ranks with the style coefficients, and the pairwise
    win-rate heatmap. Then the categories without a board and why (``arena.board_status``), the models
    with battles but no rating and why (``arena.unrated_models``), one panel per model (opened from
    its name on any board: rating per category, record against each opponent, style against the
    field), the benchmark comparison when it describes the live publication (per category: the
    agreement with each benchmark and a scatter of rating against score; ``pub.benchmarks``), the
    data-quality summary and the dump. ``options``: ``title``, ``heatmap_models``,
    ``generated_at`` of :func:`build_report_html`. Written atomically (temporary file, then rename).

    Raises
    ------
    ValueError
        The leaderboard is empty (nothing is written).
    """
    return write_text_atomic(out_path, build_report_html(pub, **options))
