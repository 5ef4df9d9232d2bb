"""The static report: ``templates/report.html.j2`` rendered with its CSS and JS inlined (one offline file)."""

from __future__ import annotations

import datetime as dt
import json
import os
from importlib.resources import files
from pathlib import Path
from typing import Any

import polars as pl
from markupsafe import Markup

from arena_pipeline.constants import DEFAULT_REPORT_PATH as _DEFAULT
from arena_pipeline.core.atomic import write_text_atomic
from arena_pipeline.core.benchmarks import MIN_MODELS
from arena_pipeline.core.categories import RULES_BY_NAME
from arena_pipeline.presentation.charts import (
    benchmark_scatter_svg,
    heatmap_svg,
    profile_chart_svg,
    rating_chart_svg,
)
from arena_pipeline.presentation.read import Published, when
from arena_pipeline.presentation.templating import coef, environment, interval

DEFAULT_REPORT_PATH = Path(_DEFAULT)
FEATURE_LABELS = {"tokens": "Answer length (tokens)", "headers": "Markdown headers", "lists": "List items",
                  "bold": "Bold spans"}


def _figures(r: Any) -> str:
    """An agreement row in words (a scatter's caption and description)."""
    head = f"{r.n_matched} matched model{'s' if r.n_matched != 1 else ''}"
    if r.spearman is None:
        return f"{head}; {r.note}" if r.note else head
    return (f"{head}; Spearman {coef(r.spearman)} {interval(r.spearman_lower, r.spearman_upper)}, "
            f"Kendall {coef(r.kendall)} {interval(r.kendall_lower, r.kendall_upper)}"
            + (f"; {r.note}" if r.note else ""))


def _svg(function):
    return lambda *args, **kwargs: Markup(function(*args, **kwargs))


#: What the report's template calls besides its filters: the charts and a few helpers.
_GLOBALS = dict(
    rating_chart=_svg(rating_chart_svg), heatmap=_svg(heatmap_svg), profile_chart=_svg(profile_chart_svg),
    benchmark_scatter=_svg(benchmark_scatter_svg), col=pl.col, rules=RULES_BY_NAME, interval=interval,
    figures=_figures, min_models=MIN_MODELS, features=FEATURE_LABELS,
    chart_methods=lambda methods, primary: [m for m in ("bt", "bt_style") if m in methods] or [primary],
)


def _static(name: str) -> Markup:
    return Markup((files("arena_pipeline.presentation") / "templates" / name).read_text(encoding="utf-8"))


def _quarantined(loaded: pl.DataFrame) -> str | None:
    """The quarantined input rows in words ('3: same_model 2, null_required 1', or 'none'); None unknown."""
    if loaded.is_empty():
        return None
    rules = loaded.filter(pl.col("outcome") != "battles")
    if rules.is_empty():
        return "none"
    return f"{rules['rows'].sum():,}: " + ", ".join(f"{rule} {n:,}" for rule, n in rules.iter_rows())


def _dump_fields(dump: dict[str, Any], loaded: pl.DataFrame) -> list[tuple[str, Any]]:
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
            ("Battles", next((f"{n:,}" for o, n in loaded.iter_rows() if o == "battles"), None)),
            ("Quarantined", _quarantined(loaded)),
            ("Files", len(files_) if isinstance(files_, list) else None), ("Status", dump.get("status")),
            ("First seen", when(dump.get("first_seen"))), ("Published at", when(dump.get("published_at")))]


def build_report_html(pub: Published, *, title: str = "LMArena leaderboards", heatmap_models: int = 20,
                      generated_at: dt.datetime | None = None) -> str:
    """The report page as a string; see :func:`render_report`."""
    if pub.leaderboard.height == 0:
        raise ValueError("the leaderboard is empty: nothing to report")
    dump = dict(pub.dump or {})
    model_ids = {m: f"model-{i}" for i, m in enumerate(pub.models())}
    return environment().get_template("report.html.j2").render(
        **_GLOBALS, pub=pub, title=title, heatmap_models=heatmap_models, categories=pub.categories(), dump=dump,
        dump_fields=_dump_fields({**dump, "revision": pub.revision}, pub.loaded) if dump or pub.revision else [],
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
