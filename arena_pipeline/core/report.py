"""A static, self-contained HTML report of the published leaderboards, and small chart helpers.

Everything is generated in Python: tables as HTML, charts as inline SVG, a few lines of inline
JavaScript for the category tabs and the sortable tables. The page loads nothing from the
network (its Content-Security-Policy forbids it) and reads fine with JavaScript off (every
category is then shown one after the other, tables in rank order). No Dagster imports.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from arena_pipeline.constants import (
    CATEGORIES,
    DUMPS_TABLE,
    LEADERBOARD_TABLE,
    PAIRWISE_TABLE,
    QUALITY_RESULTS_TABLE,
    SCHEMA,
    STYLE_COEFFICIENTS_TABLE,
)
from arena_pipeline.core.categories import RULES_BY_NAME
from arena_pipeline.core.ranking import METHODS
from arena_pipeline.core.warehouse import quoted

DEFAULT_REPORT_PATH = Path("data/report/index.html")

#: People-facing names of the ranking methods.
METHOD_LABELS: dict[str, str] = {
    "bt": "Bradley-Terry",
    "bt_style": "Bradley-Terry, style-controlled",
    "spectral": "Rank Centrality (spectral)",
}

#: Marker colour and shape of each method in the rating charts (colour-blind safe pair).
_METHOD_STYLE: dict[str, tuple[str, str]] = {
    "bt": ("#1f5fa8", "circle"),
    "bt_style": ("#b5500b", "diamond"),
    "spectral": ("#4d7a2a", "square"),
}

#: Columns of :func:`rank_changes`.
RANK_CHANGES_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "model": pl.String(),
    "rank_bt": pl.Int64(),
    "rank_bt_style": pl.Int64(),
    "rank_change": pl.Int64(),
    "rating_bt": pl.Float64(),
    "rating_bt_style": pl.Float64(),
}

#: Columns of :func:`quality_summary`.
QUALITY_SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "table": pl.String(),
    "checks": pl.Int64(),
    "passed": pl.Int64(),
    "failed_errors": pl.Int64(),
    "failed_warnings": pl.Int64(),
}


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


def _fmt(value: Any, digits: int = 1) -> str:
    if not _is_num(value):
        return "–"
    return f"{value:,.{digits}f}"


def _fmt_int(value: Any) -> str:
    return f"{value:,d}" if isinstance(value, int) else "–"


def category_label(category: str) -> str:
    """``"instruction_following"`` -> ``"Instruction following"``."""
    text = category.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "x"


def _category_order(categories: Sequence[str]) -> list[str]:
    present = list(dict.fromkeys(categories))
    return [c for c in CATEGORIES if c in present] + sorted(set(present) - set(CATEGORIES))


def _board(leaderboard: pl.DataFrame, category: str, method: str) -> pl.DataFrame:
    board = leaderboard.filter((pl.col("category") == category) & (pl.col("method") == method))
    # provisional models (under the display threshold) after the shown ones
    order = ["provisional"] if "provisional" in board.columns else []
    return board.sort(*order, "rank", "model")


def _check_board(leaderboard: pl.DataFrame, category: str, method: str) -> None:
    categories = _category_order(leaderboard.get_column("category").to_list())
    if category not in categories:
        raise ValueError(
            f"unknown category {category!r}; the leaderboard has: {', '.join(categories) or 'none'}"
        )
    methods = leaderboard.filter(pl.col("category") == category).get_column("method").unique()
    if method not in methods:
        raise ValueError(
            f"no {method!r} board for {category!r}; methods present: "
            f"{', '.join(m for m in METHODS if m in methods) or 'none'}"
        )


def _ci_text(row: Mapping[str, Any]) -> str:
    lo, hi, r = row.get("ci_lower"), row.get("ci_upper"), row.get("rating")
    if not (_is_num(lo) and _is_num(hi) and _is_num(r)):
        return "–"
    return f"+{hi - r:.1f} / −{r - lo:.1f}"


# ---------------------------------------------------------------------------------------------
# Markdown for Dagster metadata
# ---------------------------------------------------------------------------------------------


def top_n_markdown(
    leaderboard: pl.DataFrame, category: str = "overall", method: str = "bt", n: int = 10
) -> str:
    """The top ``n`` models of one board as a Markdown table (for materialization metadata).

    Parameters
    ----------
    leaderboard
        ``ranking.LEADERBOARD_SCHEMA`` rows (extra columns ignored).
    category, method
        The board.
    n
        Rows shown (models tied on a rank are cut at ``n`` rows).

    Returns
    -------
    str
        Columns ``Rank``, ``UB`` (best rank the interval allows), ``Model``, ``Rating``,
        ``95% CI`` (``−below/+above`` the rating, whole points), ``Battles``; a one-line note
        when the board is empty.

    Raises
    ------
    ValueError
        Unknown category or a method absent from that category (the message lists the valid
        ones).
    """
    _check_board(leaderboard, category, method)
    board = _board(leaderboard, category, method).head(n)
    lines = [
        f"**{category_label(category)}: {METHOD_LABELS.get(method, method)}** "
        f"(top {board.height})",
        "",
        "| Rank | UB | Model | Rating | 95% CI | Battles |",
        "| ---: | ---: | --- | ---: | --- | ---: |",
    ]
    # compact cells (interval as -lower/+upper around the rating, whole points) so the table fits
    # the Dagster UI's metadata panel on a 1400 px screen next to the longest model names
    for row in board.iter_rows(named=True):
        model = str(row["model"]).replace("|", "\\|")
        lo, hi, rating = row.get("ci_lower"), row.get("ci_upper"), row.get("rating")
        ci = (f"−{rating - lo:.0f}/+{hi - rating:.0f}"
              if _is_num(lo) and _is_num(hi) and _is_num(rating) else "–")
        lines.append(
            f"| {row['rank']} | {row['rank_ub'] if row.get('rank_ub') is not None else '–'} "
            f"| {model} | {_fmt(row['rating'])} | {ci} | {_fmt_int(row.get('n_battles'))} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Derived tables
# ---------------------------------------------------------------------------------------------


def rank_changes(leaderboard: pl.DataFrame, category: str | None = None) -> pl.DataFrame:
    """Raw (``bt``) against style-controlled (``bt_style``) rank of every model.

    Parameters
    ----------
    leaderboard
        ``ranking.LEADERBOARD_SCHEMA`` rows.
    category
        One category, or None for all.

    Returns
    -------
    pl.DataFrame
        :data:`RANK_CHANGES_SCHEMA`, one row per (category, model) on both boards;
        ``rank_change = rank_bt - rank_bt_style`` (positive: the model moves up once style
        is controlled for). Sorted by category, ``rank_bt_style``, model. Empty when a
        category lacks one of the two boards.
    """
    lb = leaderboard if category is None else leaderboard.filter(pl.col("category") == category)

    def board(method: str) -> pl.DataFrame:
        return lb.filter(pl.col("method") == method).select(
            "category",
            "model",
            pl.col("rank").alias(f"rank_{method}"),
            pl.col("rating").alias(f"rating_{method}"),
        )

    out = board("bt").join(board("bt_style"), on=["category", "model"], how="inner")
    out = out.with_columns(rank_change=pl.col("rank_bt") - pl.col("rank_bt_style"))
    order = {c: i for i, c in enumerate(_category_order(out.get_column("category").to_list()))}
    return out.sort(
        pl.col("category").replace_strict(order, return_dtype=pl.Int32), "rank_bt_style", "model"
    ).select([pl.col(c).cast(t) for c, t in RANK_CHANGES_SCHEMA.items()])


def _first_present(frame: pl.DataFrame, names: Sequence[str]) -> str | None:
    return next((n for n in names if n in frame.columns), None)


def quality_summary(quality_results: pl.DataFrame | None) -> pl.DataFrame:
    """Checks per table: how many ran, passed, and failed by severity.

    Parameters
    ----------
    quality_results
        One row per expectation result with at least ``success`` (Boolean), and a table name in
        ``table_name``, ``table`` or ``suite``; ``severity`` (``error``/``warning``, others
        counted as errors). None or empty gives an empty frame.

    Returns
    -------
    pl.DataFrame
        :data:`QUALITY_SUMMARY_SCHEMA`, sorted by table.
    """
    if quality_results is None or quality_results.height == 0 or "success" not in quality_results.columns:
        return pl.DataFrame(schema=QUALITY_SUMMARY_SCHEMA)
    table = _first_present(quality_results, ("table_name", "table", "suite"))
    severity = (
        pl.col("severity").fill_null("error") if "severity" in quality_results.columns else pl.lit("error")
    )
    failed = ~pl.col("success").fill_null(False)
    return (
        quality_results.with_columns(
            _table=pl.col(table).cast(pl.String) if table else pl.lit("all"), _severity=severity
        )
        .group_by("_table")
        .agg(
            checks=pl.len(),
            passed=(~failed).sum(),
            failed_errors=(failed & (pl.col("_severity") != "warning")).sum(),
            failed_warnings=(failed & (pl.col("_severity") == "warning")).sum(),
        )
        .rename({"_table": "table"})
        .sort("table")
        .select([pl.col(c).cast(t) for c, t in QUALITY_SUMMARY_SCHEMA.items()])
    )


# ---------------------------------------------------------------------------------------------
# SVG charts
# ---------------------------------------------------------------------------------------------


def _nice_step(span: float, target_ticks: int = 6) -> float:
    raw = max(span, 1e-9) / target_ticks
    power = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        if mult * power >= raw:
            return mult * power
    return 10 * power


def _truncate(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _label_width(labels: Sequence[str], max_chars: int, char_px: float = 6.8) -> float:
    longest = max((len(_truncate(s, max_chars)) for s in labels), default=4)
    return 12 + longest * char_px


def _marker(shape: str, x: float, y: float, colour: str, size: float = 4.0) -> str:
    if shape == "diamond":
        s = size * 1.25
        pts = f"{x:.1f},{y - s:.1f} {x + s:.1f},{y:.1f} {x:.1f},{y + s:.1f} {x - s:.1f},{y:.1f}"
        return f'<polygon class="pt" points="{pts}" fill="{colour}"/>'
    if shape == "square":
        return (f'<rect class="pt" x="{x - size:.1f}" y="{y - size:.1f}" width="{2 * size:.1f}" '
                f'height="{2 * size:.1f}" fill="{colour}"/>')
    return f'<circle class="pt" cx="{x:.1f}" cy="{y:.1f}" r="{size:.1f}" fill="{colour}"/>'


def rating_chart_svg(
    leaderboard: pl.DataFrame,
    category: str = "overall",
    methods: Sequence[str] = ("bt",),
    max_models: int | None = None,
    width: int = 860,
    chart_id: str | None = None,
) -> str:
    """Ratings with their 95% intervals as an inline SVG "forest plot" (one row per model).

    Parameters
    ----------
    leaderboard
        ``ranking.LEADERBOARD_SCHEMA`` rows (``ci_lower``/``ci_upper`` may be null: the point
        is then drawn alone).
    category
        The category to draw.
    methods
        Boards to overlay; models are ordered by the first one's rank and limited to the
        models on it. Methods absent from the category are skipped.
    max_models
        Draw only the first models (None: all).
    width
        Width in pixels (the height follows from the number of models).
    chart_id
        Prefix of the SVG's element ids (default from the category), for pages with several
        charts.

    Returns
    -------
    str
        An ``<svg>`` element with ``role="img"``, a ``<title>`` and a ``<desc>``, a
        ``<title>`` tooltip on every point, and no external references.

    Raises
    ------
    ValueError
        Unknown category, or none of ``methods`` present in it.
    """
    present = [m for m in methods if _board(leaderboard, category, m).height] if category in set(
        leaderboard.get_column("category").to_list()
    ) else []
    if not present:
        _check_board(leaderboard, category, methods[0] if methods else "bt")
    primary = _board(leaderboard, category, present[0])
    if max_models is not None:
        primary = primary.head(max_models)
    models = primary.get_column("model").to_list()
    index = {m: i for i, m in enumerate(models)}
    boards = {
        m: _board(leaderboard, category, m).filter(pl.col("model").is_in(models)).to_dicts()
        for m in present
    }
    values = [
        v
        for rows in boards.values()
        for r in rows
        for v in (r["rating"], r["ci_lower"], r["ci_upper"])
        if _is_num(v)
    ]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    step = _nice_step(hi - lo)
    lo, hi = math.floor(lo / step) * step, math.ceil(hi / step) * step
    if hi <= lo:
        hi = lo + step

    cid = chart_id or f"rating-{_slug(category)}"
    row_h = 18 if len(present) == 1 else 24
    left = _label_width(models, 40)
    top, bottom, right = 34 if len(present) > 1 else 12, 42, 24
    plot_w = width - left - right
    height = top + row_h * max(len(models), 1) + bottom

    def x_of(v: float) -> float:
        return left + (v - lo) / (hi - lo) * plot_w

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart rating-chart" id="{_esc(cid)}" '
        f'width="{width}" height="{height:.0f}" viewBox="0 0 {width} {height:.0f}" role="img" '
        f'aria-labelledby="{_esc(cid)}-title {_esc(cid)}-desc">',
        f'<title id="{_esc(cid)}-title">Ratings with 95% confidence intervals, '
        f"{_esc(category_label(category))}</title>",
        f'<desc id="{_esc(cid)}-desc">{len(models)} models ordered by '
        f"{_esc(METHOD_LABELS.get(present[0], present[0]))} rating; horizontal bars are 95% "
        f"intervals; methods: {_esc(', '.join(METHOD_LABELS.get(m, m) for m in present))}.</desc>",
    ]
    # grid and axis
    tick = lo
    axis_y = top + row_h * max(len(models), 1)
    while tick <= hi + step / 2:
        x = x_of(tick)
        parts.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y:.1f}"/>')
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{axis_y + 16:.1f}" text-anchor="middle">{tick:,.0f}</text>'
        )
        tick += step
    parts.append(
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{axis_y + 34:.1f}" '
        'text-anchor="middle">Rating</text>'
    )
    # model labels and zebra rows
    for i, model in enumerate(models):
        y = top + row_h * i
        if i % 2 == 0:
            parts.append(
                f'<rect class="zebra" x="0" y="{y:.1f}" width="{width}" height="{row_h}"/>'
            )
        parts.append(
            f'<text class="label" x="{left - 8:.1f}" y="{y + row_h / 2 + 4:.1f}" text-anchor="end">'
            f"<title>{_esc(model)}</title>{_esc(_truncate(model, 40))}</text>"
        )
    # intervals and points
    offsets = [0.0] if len(present) == 1 else [(k - (len(present) - 1) / 2) * 7 for k in range(len(present))]
    for k, method in enumerate(present):
        colour, shape = _METHOD_STYLE.get(method, ("#444", "circle"))
        for r in boards[method]:
            y = top + row_h * index[r["model"]] + row_h / 2 + offsets[k]
            tip = (
                f"{r['model']} ({METHOD_LABELS.get(method, method)}): rating {_fmt(r['rating'])}, "
                f"95% CI [{_fmt(r['ci_lower'])}, {_fmt(r['ci_upper'])}], rank {r['rank']}"
            )
            group = [f'<g class="series-{_esc(method)}"><title>{_esc(tip)}</title>']
            if _is_num(r["ci_lower"]) and _is_num(r["ci_upper"]):
                x1, x2 = x_of(r["ci_lower"]), x_of(r["ci_upper"])
                group.append(
                    f'<line class="ci" x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}" '
                    f'stroke="{colour}"/>'
                    f'<line class="ci" x1="{x1:.1f}" y1="{y - 3:.1f}" x2="{x1:.1f}" y2="{y + 3:.1f}" '
                    f'stroke="{colour}"/>'
                    f'<line class="ci" x1="{x2:.1f}" y1="{y - 3:.1f}" x2="{x2:.1f}" y2="{y + 3:.1f}" '
                    f'stroke="{colour}"/>'
                )
            if _is_num(r["rating"]):
                group.append(_marker(shape, x_of(r["rating"]), y, colour))
            group.append("</g>")
            parts.append("".join(group))
    if len(present) > 1:  # legend
        x = left
        for method in present:
            colour, shape = _METHOD_STYLE.get(method, ("#444", "circle"))
            parts.append(_marker(shape, x + 5, 14, colour))
            label = METHOD_LABELS.get(method, method)
            parts.append(f'<text class="legend" x="{x + 14:.1f}" y="18">{_esc(label)}</text>')
            x += 26 + 7 * len(label)
    parts.append("</svg>")
    return "".join(parts)


def svg_data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,...`` for an SVG string, e.g. to embed a chart in Markdown
    metadata as ``![ratings](<uri>)`` (no file, no network)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _heat_colour(value: float) -> str:
    """Diverging red (0) - near white (0.5) - blue (1)."""
    low, mid, high = (178, 24, 43), (247, 247, 247), (33, 102, 172)
    v = min(max(value, 0.0), 1.0)
    a, b, t = (low, mid, v / 0.5) if v < 0.5 else (mid, high, (v - 0.5) / 0.5)
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def heatmap_svg(
    pairwise: pl.DataFrame,
    leaderboard: pl.DataFrame,
    category: str = "overall",
    max_models: int = 20,
    chart_id: str | None = None,
) -> str:
    """Observed pairwise win rates of the top models as an inline SVG heatmap.

    Cell (row i, column j) is the share of battles between the two that the row model won
    (``pairwise.win_rate_1`` or its complement, so ties count as the pairwise table counts
    them). Models are the first ``max_models`` of the category's ``bt`` board (else its first
    board) in rank order. Cells without battles are grey and hatched; every cell has a
    tooltip with the counts and the Bradley-Terry prediction.

    Returns
    -------
    str
        An ``<svg>`` element (``role="img"`` with ``<title>``/``<desc>``); an empty string
        when the category has no board.
    """
    lb = leaderboard.filter(pl.col("category") == category)
    if lb.height == 0:
        return ""
    methods = lb.get_column("method").unique().to_list()
    method = "bt" if "bt" in methods else next(m for m in METHODS + tuple(methods) if m in methods)
    models = _board(leaderboard, category, method).head(max_models).get_column("model").to_list()
    pw = pairwise.filter(
        (pl.col("category") == category)
        & pl.col("model_1").is_in(models)
        & pl.col("model_2").is_in(models)
    )
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in pw.iter_rows(named=True):
        rate = r["win_rate_1"]
        pred = r["predicted_win_rate_1"]
        draws = (r["ties"] or 0) + (r["both_bad"] or 0)
        cells[(r["model_1"], r["model_2"])] = {
            "rate": rate, "pred": pred, "n": r["battles"], "w": r["wins_1"], "l": r["wins_2"], "t": draws,
        }
        cells[(r["model_2"], r["model_1"])] = {
            "rate": None if rate is None else 1.0 - rate,
            "pred": None if pred is None else 1.0 - pred,
            "n": r["battles"], "w": r["wins_2"], "l": r["wins_1"], "t": draws,
        }
    cid = chart_id or f"heatmap-{_slug(category)}"
    k = len(models)
    cell = 30 if k <= 15 else 24 if k <= 25 else 16
    show_values = cell >= 24
    label = _label_width(models, 32, 7.2)
    left = label
    top = label * 0.71 + 12  # column labels are rotated by 45 degrees
    width = max(left + cell * k + label * 0.71 + 8, left + 360)
    height = top + cell * k + 50
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" id="{_esc(cid)}" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" aria-labelledby="{_esc(cid)}-title {_esc(cid)}-desc">',
        f'<title id="{_esc(cid)}-title">Pairwise win rates, {_esc(category_label(category))}</title>',
        f'<desc id="{_esc(cid)}-desc">Share of battles the row model won against the column model, '
        f"for the top {k} models by rating; blue: the row model won more often, red: less often; "
        "grey: never met.</desc>",
        '<defs><pattern id="' + _esc(cid) + '-none" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#e4e4e4"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#c8c8c8" stroke-width="2"/></pattern></defs>',
    ]
    for i, model in enumerate(models):
        y = top + cell * i + cell / 2 + 4
        parts.append(
            f'<text class="label" x="{left - 6:.1f}" y="{y:.1f}" text-anchor="end">'
            f"<title>{_esc(model)}</title>{_esc(_truncate(model, 32))}</text>"
        )
        x = left + cell * i + cell / 2 + 4
        parts.append(
            f'<text class="label" x="{x:.1f}" y="{top - 6:.1f}" text-anchor="start" '
            f'transform="rotate(-45 {x:.1f} {top - 6:.1f})"><title>{_esc(model)}</title>'
            f"{_esc(_truncate(model, 32))}</text>"
        )
    for i, row_model in enumerate(models):
        for j, col_model in enumerate(models):
            x, y = left + cell * j, top + cell * i
            if i == j:
                parts.append(f'<rect class="diag" x="{x:.1f}" y="{y:.1f}" width="{cell}" height="{cell}"/>')
                continue
            c = cells.get((row_model, col_model))
            if c is None or c["rate"] is None:
                tip = f"{row_model} vs {col_model}: no battles"
                parts.append(
                    f'<rect class="cell empty" x="{x:.1f}" y="{y:.1f}" width="{cell}" height="{cell}" '
                    f'fill="url(#{_esc(cid)}-none)"><title>{_esc(tip)}</title></rect>'
                )
                continue
            rate = c["rate"]
            pred = f"; predicted {c['pred']:.0%}" if _is_num(c["pred"]) else ""
            tip = (
                f"{row_model} vs {col_model}: won {rate:.0%} of {c['n']} battles "
                f"({c['w']} wins, {c['l']} losses, {c['t']} ties/both bad){pred}"
            )
            parts.append(
                f'<g class="cell"><title>{_esc(tip)}</title><rect x="{x:.1f}" y="{y:.1f}" width="{cell}" '
                f'height="{cell}" fill="{_heat_colour(rate)}"/>'
            )
            if show_values:
                ink = "#ffffff" if abs(rate - 0.5) > 0.3 else "#1a1a1a"
                parts.append(
                    f'<text class="value" x="{x + cell / 2:.1f}" y="{y + cell / 2 + 4:.1f}" '
                    f'text-anchor="middle" fill="{ink}">{round(rate * 100)}</text>'
                )
            parts.append("</g>")
    # colour legend
    ly = top + cell * k + 18
    for s in range(11):
        parts.append(
            f'<rect x="{left + s * 18:.1f}" y="{ly:.1f}" width="18" height="10" fill="{_heat_colour(s / 10)}"/>'
        )
    parts.append(f'<text class="tick" x="{left:.1f}" y="{ly + 24:.1f}">0%</text>')
    parts.append(
        f'<text class="tick" x="{left + 99:.1f}" y="{ly + 24:.1f}" text-anchor="middle">50%</text>'
    )
    parts.append(
        f'<text class="tick" x="{left + 198:.1f}" y="{ly + 24:.1f}" text-anchor="end">100%</text>'
    )
    parts.append(
        f'<text class="tick" x="{left + 210:.1f}" y="{ly + 9:.1f}">row model\'s win rate</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------------

_CSS = """
:root { --ink:#1a1a1a; --muted:#555; --line:#d0d0d0; --bg:#ffffff; --panel:#f6f7f9; --accent:#1f5fa8;
        --good:#1b6e2d; --bad:#a4161a; --warn:#8a5300; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
       color:var(--ink); background:var(--bg); }
a { color:var(--accent); }
.skip { position:absolute; left:-999px; top:0; background:#fff; padding:.5em; }
.skip:focus { left:.5em; z-index:10; }
.sr-only { position:absolute; width:1px; height:1px; overflow:hidden; clip:rect(0 0 0 0); white-space:nowrap; }
header.page { padding:1.2em 2em .6em; border-bottom:1px solid var(--line); background:var(--panel); }
header.page h1 { margin:0 0 .2em; font-size:1.6em; }
.meta { color:var(--muted); margin:.2em 0; }
main { padding:0 2em 2em; max-width:1400px; }
code { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:.92em; }
[role=tablist] { display:flex; flex-wrap:wrap; gap:.3em; margin:1.2em 0 0; border-bottom:2px solid var(--line); }
[role=tab] { font:inherit; border:1px solid var(--line); border-bottom:none; background:var(--panel);
             padding:.45em .9em; border-radius:6px 6px 0 0; cursor:pointer; color:var(--ink); }
[role=tab][aria-selected=true] { background:var(--accent); color:#fff; border-color:var(--accent); }
[role=tab]:focus-visible, th button:focus-visible, summary:focus-visible { outline:3px solid #f0a000; outline-offset:2px; }
section.category { padding-top:.5em; }
section.category > h2 { margin:.8em 0 .1em; }
h3 { margin:1.6em 0 .4em; font-size:1.15em; }
.note { color:var(--muted); font-size:.92em; margin:.2em 0 .6em; max-width:70em; }
.table-wrap { overflow-x:auto; max-width:100%; }
table { border-collapse:collapse; margin:.4em 0 1em; font-variant-numeric:tabular-nums; }
caption { text-align:left; color:var(--muted); font-size:.9em; padding:.2em 0; caption-side:top; }
th, td { padding:.28em .7em; border-bottom:1px solid var(--line); text-align:left; vertical-align:top; }
td.num, th.num { text-align:right; }
thead th { background:var(--panel); position:sticky; top:0; }
th button { font:inherit; font-weight:600; background:none; border:none; padding:0; cursor:pointer; color:inherit; }
th[aria-sort=ascending] button::after { content:" ▲"; font-size:.75em; }
th[aria-sort=descending] button::after { content:" ▼"; font-size:.75em; }
tbody tr:nth-child(even) { background:#fafbfc; }
tbody tr:hover { background:#eef3fb; }
.up { color:var(--good); } .down { color:var(--bad); } .same { color:var(--muted); }
.badge { display:inline-block; padding:0 .5em; border-radius:.8em; font-size:.85em; font-weight:600; }
.badge.ok { background:#dff3e4; color:var(--good); } .badge.fail { background:#fbe1e1; color:var(--bad); }
.badge.warn { background:#fdf0d5; color:var(--warn); }
details { margin:.6em 0; } summary { cursor:pointer; font-weight:600; }
dl.dump { display:grid; grid-template-columns:max-content 1fr; gap:.15em 1.2em; margin:.4em 0; }
dl.dump dt { color:var(--muted); } dl.dump dd { margin:0; }
.chart { max-width:100%; height:auto; display:block; }
.chart text { font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif; font-size:12px; fill:#1a1a1a; }
.chart .tick { fill:#555; font-size:11px; } .chart .axis-label { font-weight:600; }
.chart .grid { stroke:#e2e2e2; stroke-width:1; } .chart .zebra { fill:#f7f8fa; }
.chart .ci { stroke-width:2; } .chart .diag { fill:#ffffff; stroke:#d0d0d0; }
.chart .cell rect, .chart rect.cell { stroke:#ffffff; stroke-width:1; }
.chart .value { font-size:10px; }
.grid2 { display:flex; flex-wrap:wrap; gap:2em; align-items:flex-start; }
footer { padding:1em 2em; color:var(--muted); border-top:1px solid var(--line); font-size:.9em; }
@media print { [role=tablist] { display:none; } section.category[hidden] { display:block !important; } }
"""

_JS = """
(function () {
  'use strict';
  // Sortable tables: every <th> with a <button> sorts its column (numbers by data-value).
  function cellKey(row, index, numeric) {
    var cell = row.cells[index];
    var raw = cell.hasAttribute('data-value') ? cell.getAttribute('data-value') : cell.textContent.trim();
    if (!numeric) { return raw.toLowerCase(); }
    var value = parseFloat(raw);
    return isNaN(value) ? null : value;
  }
  function sortTable(table, th) {
    var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var index = headers.indexOf(th);
    var numeric = th.getAttribute('data-type') === 'num';
    var direction = th.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending';
    headers.forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', direction);
    var sign = direction === 'ascending' ? 1 : -1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a, index, numeric), y = cellKey(b, index, numeric);
      if (x === null && y === null) { return 0; }
      if (x === null) { return 1; }   // missing values last either way
      if (y === null) { return -1; }
      if (numeric) { return sign * (x - y); }
      return sign * x.localeCompare(y);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    var status = document.getElementById('sort-status');
    if (status) { status.textContent = 'Sorted by ' + th.textContent.trim() + ', ' + direction; }
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      var button = th.querySelector('button');
      if (button) { button.addEventListener('click', function () { sortTable(table, th); }); }
    });
  });

  // Category tabs (WAI-ARIA tabs pattern); without JavaScript every category is shown.
  var tablist = document.getElementById('category-tabs');
  if (!tablist) { return; }
  var tabs = Array.prototype.slice.call(tablist.querySelectorAll('[role=tab]'));
  function select(tab, focus) {
    tabs.forEach(function (t) {
      var on = t === tab;
      t.setAttribute('aria-selected', on ? 'true' : 'false');
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute('aria-controls')).hidden = !on;
    });
    if (focus) { tab.focus(); }
  }
  tabs.forEach(function (tab, i) {
    tab.addEventListener('click', function () {
      select(tab, false);
      if (history.replaceState) { history.replaceState(null, '', '#' + tab.getAttribute('aria-controls')); }
    });
    tab.addEventListener('keydown', function (event) {
      var next = null;
      if (event.key === 'ArrowRight') { next = tabs[(i + 1) % tabs.length]; }
      else if (event.key === 'ArrowLeft') { next = tabs[(i - 1 + tabs.length) % tabs.length]; }
      else if (event.key === 'Home') { next = tabs[0]; }
      else if (event.key === 'End') { next = tabs[tabs.length - 1]; }
      if (next) { event.preventDefault(); select(next, true); }
    });
  });
  tablist.hidden = false;
  var wanted = tabs.filter(function (t) { return '#' + t.getAttribute('aria-controls') === location.hash; });
  select(wanted.length ? wanted[0] : tabs[0], false);
})();
"""


@dataclass(frozen=True)
class _Column:
    key: str
    label: str
    numeric: bool = False
    sortable: bool = True
    abbr: str | None = None


def _table(
    columns: Sequence[_Column],
    rows: Sequence[Mapping[str, tuple[str, Any]]],
    caption: str,
    table_class: str = "sortable",
    sorted_by: str | None = None,
) -> str:
    """An HTML table; each row maps a column key to (display html, sort value or None)."""
    head = []
    for col in columns:
        cls = ' class="num"' if col.numeric else ""
        kind = ' data-type="num"' if col.numeric else ' data-type="text"'
        sort = ' aria-sort="ascending"' if col.key == sorted_by else ""
        label = _esc(col.label)
        if col.abbr:
            label = f'<abbr title="{_esc(col.abbr)}">{label}</abbr>'
        inner = f'<button type="button">{label}</button>' if col.sortable else label
        head.append(f'<th scope="col"{cls}{kind}{sort}>{inner}</th>')
    body = []
    for row in rows:
        cells = []
        for col in columns:
            shown, value = row.get(col.key, ("–", None))
            cls = ' class="num"' if col.numeric else ""
            data = "" if value is None else f' data-value="{_esc(value)}"'
            if col.key == "model":
                cells.append(f'<th scope="row"{data}>{shown}</th>')
            else:
                cells.append(f"<td{cls}{data}>{shown}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="table-wrap"><table class="{table_class}"><caption>{_esc(caption)}</caption>'
        f"<thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


_BOARD_COLUMNS = (
    _Column("rank", "Rank", True),
    _Column("rank_ub", "Rank (UB)", True, abbr="Upper bound of the rank: 1 + the number of models "
            "whose interval lies entirely above this model's"),
    _Column("model", "Model"),
    _Column("rating", "Rating", True),
    _Column("ci", "95% CI", True, abbr="Distance from the rating to the upper / lower end of the 95% interval"),
    _Column("n_battles", "Battles", True),
    _Column("record", "W / L / T", False, sortable=False, abbr="Wins / losses / ties and both-bad votes"),
    _Column("win_rate", "Win rate", True, abbr="(wins + ties / 2) / battles"),
)


def _board_table(board: pl.DataFrame, caption: str) -> str:
    rows = []
    for r in board.iter_rows(named=True):
        half = (
            (r["ci_upper"] - r["ci_lower"]) / 2
            if _is_num(r.get("ci_lower")) and _is_num(r.get("ci_upper"))
            else None
        )
        rows.append(
            {
                "rank": (_esc(r["rank"]), r["rank"]),
                "rank_ub": (_esc(r["rank_ub"]) if r.get("rank_ub") is not None else "–", r.get("rank_ub")),
                "model": (
                    _esc(r["model"])
                    + (f' <small title="{_esc(r.get("provisional_reason"))}">(provisional)</small>'
                       if r.get("provisional") else ""),
                    r["model"],
                ),
                "rating": (_fmt(r["rating"]), r["rating"]),
                "ci": (_esc(_ci_text(r)), half),
                "n_battles": (_fmt_int(r.get("n_battles")), r.get("n_battles")),
                "record": (
                    f"{_fmt_int(r.get('wins'))} / {_fmt_int(r.get('losses'))} / {_fmt_int(r.get('ties'))}",
                    None,
                ),
                "win_rate": (
                    f"{r['win_rate']:.1%}" if _is_num(r.get("win_rate")) else "–",
                    r.get("win_rate"),
                ),
            }
        )
    return _table(_BOARD_COLUMNS, rows, caption, "sortable leaderboard", sorted_by="rank")


def _rank_change_html(changes: pl.DataFrame, category: str) -> str:
    if changes.height == 0:
        return '<p class="note">Style control needs both the <code>bt</code> and the <code>bt_style</code> boards; this category lacks one.</p>'
    columns = (
        _Column("model", "Model"),
        _Column("rank_bt", "Raw rank", True),
        _Column("rank_bt_style", "Style-controlled rank", True),
        _Column("rank_change", "Change", True, abbr="Raw rank minus style-controlled rank: positive moves up"),
        _Column("rating_bt", "Raw rating", True),
        _Column("rating_bt_style", "Style-controlled rating", True),
    )
    rows = []
    for r in changes.iter_rows(named=True):
        d = r["rank_change"]
        if d > 0:
            shown = f'<span class="up" aria-label="up {d}">▲ {d}</span>'
        elif d < 0:
            shown = f'<span class="down" aria-label="down {-d}">▼ {-d}</span>'
        else:
            shown = '<span class="same" aria-label="unchanged">=</span>'
        rows.append(
            {
                "model": (_esc(r["model"]), r["model"]),
                "rank_bt": (_esc(r["rank_bt"]), r["rank_bt"]),
                "rank_bt_style": (_esc(r["rank_bt_style"]), r["rank_bt_style"]),
                "rank_change": (shown, d),
                "rating_bt": (_fmt(r["rating_bt"]), r["rating_bt"]),
                "rating_bt_style": (_fmt(r["rating_bt_style"]), r["rating_bt_style"]),
            }
        )
    moved = changes.filter(pl.col("rank_change") != 0).height
    caption = (
        f"{category_label(category)}: rank before and after controlling for answer length and "
        f"formatting ({moved} of {changes.height} models change rank)"
    )
    return _table(columns, rows, caption, "sortable rank-changes", sorted_by="rank_bt_style")


_FEATURE_LABELS = {
    "tokens": "Answer length (tokens)",
    "headers": "Markdown headers",
    "lists": "List items",
    "bold": "Bold spans",
}


def _style_html(style: pl.DataFrame, category: str) -> str:
    rows = style.filter(pl.col("category") == category) if style.height else style
    if rows.height == 0:
        return ""
    body = []
    for r in rows.iter_rows(named=True):
        ci = (
            f"[{r['ci_lower']:.3f}, {r['ci_upper']:.3f}]"
            if _is_num(r.get("ci_lower")) and _is_num(r.get("ci_upper"))
            else "–"
        )
        body.append(
            f'<tr><th scope="row">{_esc(_FEATURE_LABELS.get(r["feature"], r["feature"]))}</th>'
            f'<td class="num">{_fmt(r["coefficient"], 3)}</td><td class="num">{_esc(ci)}</td></tr>'
        )
    return (
        '<div class="table-wrap"><table class="style-coefficients"><caption>Style coefficients '
        "(log-odds per standard deviation of the side-A minus side-B difference; positive: voters "
        "favour more of it)</caption><thead><tr><th scope=\"col\">Feature</th>"
        '<th scope="col" class="num">Coefficient</th><th scope="col" class="num">95% CI</th></tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _dump_info(dumps_row: Mapping[str, Any] | pl.DataFrame | None, leaderboard: pl.DataFrame) -> dict[str, Any]:
    if isinstance(dumps_row, pl.DataFrame):
        info = dumps_row.row(0, named=True) if dumps_row.height else {}
    else:
        info = dict(dumps_row or {})
    if not info.get("revision") and "dump_revision" in leaderboard.columns and leaderboard.height:
        info["revision"] = leaderboard.get_column("dump_revision")[0]
    return info


def _dump_html(info: Mapping[str, Any]) -> str:
    if not info:
        return '<p class="note">No dump information was given.</p>'
    files = info.get("files")
    if isinstance(files, str):
        try:
            files = json.loads(files)
        except ValueError:
            files = None
    fields = [
        ("Revision", f"<code>{_esc(info.get('revision'))}</code>" if info.get("revision") else None),
        ("Source", _esc(info.get("source")) if info.get("source") else None),
        ("Source kind", _esc(info.get("source_kind")) if info.get("source_kind") else None),
        ("Requested revision", _esc(info.get("requested_revision")) if info.get("requested_revision") else None),
        ("Rows", _fmt_int(info.get("rows")) if isinstance(info.get("rows"), int) else None),
        ("Files", _esc(len(files)) if isinstance(files, list) else None),
        ("Status", _esc(info.get("status")) if info.get("status") else None),
        ("First seen", _esc(_when(info.get("first_seen")))),
        ("Published at", _esc(_when(info.get("published_at")))),
    ]
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in fields if v)
    return f'<dl class="dump">{items}</dl>'


def _when(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return "" if value is None else str(value)


def _quality_html(quality_results: pl.DataFrame | None) -> str:
    summary = quality_summary(quality_results)
    if summary.height == 0:
        return '<p class="note">No data-quality results were published with this dump.</p>'
    total = int(summary.get_column("checks").sum())
    errors = int(summary.get_column("failed_errors").sum())
    warnings = int(summary.get_column("failed_warnings").sum())
    if errors:
        verdict = f'<span class="badge fail">{errors} failed</span>'
    elif warnings:
        verdict = f'<span class="badge warn">{warnings} warning{"s" if warnings != 1 else ""}</span>'
    else:
        verdict = '<span class="badge ok">all passed</span>'
    lines = [f'<p>{total} checks: {verdict}</p>']
    columns = (
        _Column("table", "Table"),
        _Column("checks", "Checks", True),
        _Column("passed", "Passed", True),
        _Column("failed_errors", "Failed (error)", True),
        _Column("failed_warnings", "Failed (warning)", True),
    )
    rows = [
        {
            "table": (f"<code>{_esc(r['table'])}</code>", r["table"]),
            "checks": (_fmt_int(r["checks"]), r["checks"]),
            "passed": (_fmt_int(r["passed"]), r["passed"]),
            "failed_errors": (_fmt_int(r["failed_errors"]), r["failed_errors"]),
            "failed_warnings": (_fmt_int(r["failed_warnings"]), r["failed_warnings"]),
        }
        for r in summary.iter_rows(named=True)
    ]
    lines.append(_table(columns, rows, "Checks per table", "sortable quality-summary", sorted_by="table"))
    failed = quality_results.filter(~pl.col("success").fill_null(False))
    if failed.height:
        table = _first_present(failed, ("table_name", "table", "suite"))
        expectation = _first_present(failed, ("expectation", "expectation_id", "expectation_type"))
        column = _first_present(failed, ("column", "column_name"))
        body = []
        for r in failed.iter_rows(named=True):
            pct = r.get("unexpected_percent")
            body.append(
                "<tr>"
                f"<td><code>{_esc(r.get(table) if table else '')}</code></td>"
                f"<td>{_esc(r.get(expectation) if expectation else '')}</td>"
                f"<td>{_esc((r.get(column) if column else None) or '–')}</td>"
                f"<td>{_esc(r.get('severity') or 'error')}</td>"
                f'<td class="num">{_fmt_int(r.get("unexpected_count"))}</td>'
                f'<td class="num">{_fmt(pct, 2) + "%" if _is_num(pct) else "–"}</td>'
                "</tr>"
            )
        lines.append(
            '<div class="table-wrap"><table class="quality-failures"><caption>Failed checks</caption>'
            '<thead><tr><th scope="col">Table</th><th scope="col">Expectation</th>'
            '<th scope="col">Column</th><th scope="col">Severity</th>'
            '<th scope="col" class="num">Unexpected rows</th><th scope="col" class="num">Unexpected %</th>'
            f"</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )
    return "".join(lines)


def _category_section(
    category: str,
    leaderboard: pl.DataFrame,
    pairwise: pl.DataFrame,
    style: pl.DataFrame,
    heatmap_models: int,
) -> str:
    lb = leaderboard.filter(pl.col("category") == category)
    present = [m for m in METHODS if m in set(lb.get_column("method").to_list())]
    present += sorted(set(lb.get_column("method").to_list()) - set(present))
    primary = present[0]
    board = _board(leaderboard, category, primary)
    slug = _slug(category)
    rule = RULES_BY_NAME.get(category)
    battles = int(board.get_column("n_battles").sum() // 2) if board.height else 0
    ci_method = board.get_column("ci_method")[0] if board.height and "ci_method" in board.columns else None
    out = [
        f'<section class="category" id="cat-{slug}" role="tabpanel" aria-labelledby="tab-{slug}" tabindex="0">',
        f"<h2>{_esc(category_label(category))}</h2>",
        f'<p class="note">{_esc(rule.description.capitalize()) + ". " if rule else ""}'
        f"{board.height} models on the board, about {battles:,} battles fitted"
        f"{'; intervals: ' + _esc(ci_method) if ci_method else ''}.</p>",
        f"<h3>Leaderboard: {_esc(METHOD_LABELS.get(primary, primary))}</h3>",
        '<p class="note">Click a column header to sort. Models whose intervals overlap may share a '
        "rank; <em>Rank (UB)</em> is the best rank the model could plausibly hold.</p>",
        _board_table(board, f"{category_label(category)}, {METHOD_LABELS.get(primary, primary)}"),
    ]
    for method in present[1:]:
        other = _board(leaderboard, category, method)
        out.append(
            f"<details><summary>{_esc(METHOD_LABELS.get(method, method))} leaderboard "
            f"({other.height} models)</summary>"
            + _board_table(other, f"{category_label(category)}, {METHOD_LABELS.get(method, method)}")
            + "</details>"
        )
    chart_methods = [m for m in ("bt", "bt_style") if m in present] or [primary]
    out.append("<h3>Ratings with 95% confidence intervals</h3>")
    out.append(rating_chart_svg(leaderboard, category, chart_methods, chart_id=f"rating-{slug}"))
    out.append("<h3>Raw vs style-controlled rank</h3>")
    out.append('<div class="grid2"><div>')
    out.append(_rank_change_html(rank_changes(leaderboard, category), category))
    out.append("</div><div>")
    out.append(_style_html(style, category))
    out.append("</div></div>")
    heat = heatmap_svg(pairwise, leaderboard, category, heatmap_models, chart_id=f"heatmap-{slug}")
    if heat:
        shown = min(board.height, heatmap_models)
        out.append(f"<h3>Pairwise win rates (top {shown} models)</h3>")
        out.append(
            '<p class="note">Each cell: the share of their battles the row model won against the '
            "column model (ties and both-bad votes count half); hover for counts and the "
            "Bradley-Terry prediction.</p>"
        )
        out.append(heat)
    out.append("</section>")
    return "\n".join(out)


def build_report_html(
    leaderboard: pl.DataFrame,
    pairwise: pl.DataFrame,
    style_coefficients: pl.DataFrame,
    quality_results: pl.DataFrame | None = None,
    dumps_row: Mapping[str, Any] | pl.DataFrame | None = None,
    *,
    title: str = "LMArena leaderboards",
    heatmap_models: int = 20,
    generated_at: dt.datetime | None = None,
) -> str:
    """The report page as a string; see :func:`render_report`."""
    if leaderboard.height == 0:
        raise ValueError("the leaderboard is empty: nothing to report")
    categories = _category_order(leaderboard.get_column("category").to_list())
    info = _dump_info(dumps_row, leaderboard)
    generated = (generated_at or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    revision = info.get("revision")
    published = _when(info.get("published_at"))
    meta = []
    if revision:
        meta.append(f"Dump revision <code>{_esc(revision)}</code>")
    if published:
        meta.append(f"published {_esc(published)}")
    if info.get("source"):
        meta.append(f"source {_esc(info['source'])}")
    tabs = "".join(
        f'<button type="button" role="tab" id="tab-{_slug(c)}" aria-controls="cat-{_slug(c)}" '
        f'aria-selected="false" tabindex="-1">{_esc(category_label(c))}</button>'
        for c in categories
    )
    sections = "\n".join(
        _category_section(c, leaderboard, pairwise, style_coefficients, heatmap_models) for c in categories
    )
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="generator" content="arena_pipeline">
<title>{_esc(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="page">
<h1>{_esc(title)}</h1>
<p class="meta">{' · '.join(meta) or 'Dump revision unknown'}</p>
<p class="meta">Human-preference votes from LMArena, ranked per category: {len(categories)} {'category' if len(categories) == 1 else 'categories'}.</p>
</header>
<main id="main">
<nav aria-label="Categories"><div role="tablist" id="category-tabs" aria-label="Category" hidden>{tabs}</div></nav>
<div id="sort-status" class="sr-only" role="status" aria-live="polite"></div>
{sections}
<section id="data-quality" aria-labelledby="data-quality-title">
<h2 id="data-quality-title">Data quality</h2>
{_quality_html(quality_results)}
</section>
<section id="dump" aria-labelledby="dump-title">
<h2 id="dump-title">Dump</h2>
{_dump_html(info)}
</section>
<section id="about" aria-labelledby="about-title">
<h2 id="about-title">How to read this report</h2>
<p class="note"><strong>Bradley-Terry</strong>: ratings (Elo-like scale, 400 points = 10:1 odds) fitted by
maximum likelihood to every vote of the category, ties and both-bad votes counting half a win each way.
<strong>Style-controlled</strong>: the same, with answer length and Markdown formatting (headers, lists,
bold) as covariates, so a model does not gain from being longer or more formatted.
<strong>Rank Centrality</strong>: a spectral ranking of the same votes, as a cross-check.
Intervals are 95% bootstrap (or sandwich) intervals.</p>
</section>
</main>
<footer>Generated {_esc(generated)} by arena_pipeline. This file is self-contained and works offline.</footer>
<script>{_JS}</script>
</body>
</html>
"""


def render_report(
    leaderboard: pl.DataFrame,
    pairwise: pl.DataFrame,
    style_coefficients: pl.DataFrame,
    quality_results: pl.DataFrame | None = None,
    dumps_row: Mapping[str, Any] | pl.DataFrame | None = None,
    out_path: str | os.PathLike[str] = DEFAULT_REPORT_PATH,
    *,
    title: str = "LMArena leaderboards",
    heatmap_models: int = 20,
    generated_at: dt.datetime | None = None,
) -> Path:
    """Write the leaderboards as one self-contained, offline HTML file.

    Per category (one tab each, in ``constants.CATEGORIES`` order): the primary board
    (``bt``, else the first method present) as a sortable table, the other boards in
    collapsible sections, a rating chart with 95% intervals (``bt`` and ``bt_style``
    overlaid), raw vs style-controlled ranks with the style coefficients, and the pairwise
    win-rate heatmap of the top models. Then the data-quality summary and the dump's
    revision and dates.

    Parameters
    ----------
    leaderboard
        ``ranking.LEADERBOARD_SCHEMA`` (extra columns such as ``dump_revision`` ignored).
    pairwise
        ``ranking.PAIRWISE_SCHEMA``.
    style_coefficients
        ``ranking.STYLE_COEFFICIENTS_SCHEMA``; may be empty.
    quality_results
        Expectation results (``success``, ``severity``, a table name in ``table_name``/
        ``table``/``suite``, optionally ``expectation``/``expectation_id``, ``column``,
        ``unexpected_count``, ``unexpected_percent``), or None.
    dumps_row
        The published ``arena.dumps`` row as a dict or a one-row frame (``revision``,
        ``source``, ``published_at``...), or None (the revision is then taken from
        ``leaderboard.dump_revision`` when present).
    out_path
        Output file; parent directories are created. Written atomically (temporary file,
        then rename).
    title
        Page title.
    heatmap_models
        Models in each heatmap (the top of the board).
    generated_at
        Timestamp printed in the footer (default: now, UTC).

    Returns
    -------
    Path
        ``out_path``.

    Raises
    ------
    ValueError
        The leaderboard is empty.
    """
    page = build_report_html(
        leaderboard,
        pairwise,
        style_coefficients,
        quality_results,
        dumps_row,
        title=title,
        heatmap_models=heatmap_models,
        generated_at=generated_at,
    )
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(page)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


# ---------------------------------------------------------------------------------------------
# Reading the published tables
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportInputs:
    """The published frames :func:`render_report` needs, read from one warehouse snapshot."""

    leaderboard: pl.DataFrame
    pairwise: pl.DataFrame
    style_coefficients: pl.DataFrame
    quality_results: pl.DataFrame | None
    dumps_row: dict[str, Any] | None


def relation_exists(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> bool:
    """Whether ``schema.name`` is a table or a view."""
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
            [schema, name],
        ).fetchone()[0]
    )


def _read(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pl.DataFrame:
    return pl.from_arrow(con.execute(sql, params or []).to_arrow_table())


def published_dump_row(con: duckdb.DuckDBPyConnection, schema: str = SCHEMA) -> dict[str, Any] | None:
    """The latest ``status = 'published'`` row of ``schema.dumps``, or None."""
    if not relation_exists(con, schema, DUMPS_TABLE):
        return None
    frame = _read(
        con,
        f"SELECT * FROM {quoted(schema, DUMPS_TABLE)} WHERE status = 'published' "
        "ORDER BY published_at DESC NULLS LAST LIMIT 1",
    )
    return frame.row(0, named=True) if frame.height else None


def load_report_inputs(con: duckdb.DuckDBPyConnection, schema: str = SCHEMA) -> ReportInputs:
    """Read the published leaderboard tables in one transaction (a consistent snapshot).

    ``leaderboard`` is required; ``pairwise`` and ``style_coefficients`` are empty frames of
    their schema when missing; ``quality_results`` (restricted to the leaderboard's
    ``dump_revision`` when both carry one) and the dumps row are None when missing.

    Raises
    ------
    LookupError
        ``schema.leaderboard`` does not exist.
    """
    from arena_pipeline.core.ranking import PAIRWISE_SCHEMA, STYLE_COEFFICIENTS_SCHEMA

    con.execute("BEGIN TRANSACTION")
    try:
        if not relation_exists(con, schema, LEADERBOARD_TABLE):
            raise LookupError(f"{schema}.leaderboard does not exist")
        leaderboard = _read(con, f"SELECT * FROM {quoted(schema, LEADERBOARD_TABLE)}")
        pairwise = (
            _read(con, f"SELECT * FROM {quoted(schema, PAIRWISE_TABLE)}")
            if relation_exists(con, schema, PAIRWISE_TABLE)
            else pl.DataFrame(schema=PAIRWISE_SCHEMA)
        )
        style = (
            _read(con, f"SELECT * FROM {quoted(schema, STYLE_COEFFICIENTS_TABLE)}")
            if relation_exists(con, schema, STYLE_COEFFICIENTS_TABLE)
            else pl.DataFrame(schema=STYLE_COEFFICIENTS_SCHEMA)
        )
        quality = (
            _read(con, f"SELECT * FROM {quoted(schema, QUALITY_RESULTS_TABLE)}")
            if relation_exists(con, schema, QUALITY_RESULTS_TABLE)
            else None
        )
        dump = published_dump_row(con, schema)
    finally:
        con.execute("COMMIT")
    revisions = (
        leaderboard.get_column("dump_revision").drop_nulls().unique().to_list()
        if "dump_revision" in leaderboard.columns
        else []
    )
    revision = revisions[0] if len(revisions) == 1 else (dump or {}).get("revision")
    if quality is not None:
        quality = latest_quality_results(quality, revision)
    return ReportInputs(leaderboard, pairwise, style, quality, dump)


def latest_quality_results(quality_results: pl.DataFrame, revision: str | None) -> pl.DataFrame:
    """The rows of ``revision`` (when given and the frame has ``dump_revision``), and of each
    table only its latest check run (the rows with its greatest ``checked_at``, when present):
    ``arena.quality_results`` accumulates every run of every dump."""
    out = quality_results
    if revision is not None and "dump_revision" in out.columns:
        out = out.filter(pl.col("dump_revision") == revision)
    table = _first_present(out, ("table_name", "table", "suite"))
    if "checked_at" in out.columns and table and out.height:
        out = out.filter(pl.col("checked_at") == pl.col("checked_at").max().over(table))
    return out
