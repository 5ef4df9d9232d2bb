"""Inline SVG charts (no external references): rating forest plots and the pairwise win-rate heatmap."""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Sequence
from html import escape
from typing import Any

import polars as pl

from arena_pipeline.core.categories import category_label
from arena_pipeline.presentation.read import METHOD_LABELS, Published

#: Marker colour and shape of each method (colour-blind safe).
METHOD_STYLE: dict[str, tuple[str, str]] = {
    "bt": ("#1f5fa8", "circle"), "bt_style": ("#b5500b", "diamond"), "spectral": ("#4d7a2a", "square"),
}


def _esc(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


def _fmt(value: Any) -> str:
    return f"{value:,.1f}" if is_num(value) else "–"


def slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "x"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _nice_step(span: float, ticks: int = 6) -> float:
    raw = max(span, 1e-9) / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next((m * power for m in (1, 2, 2.5, 5) if m * power >= raw), 10 * power)


def _marker(shape: str, x: float, y: float, colour: str, size: float = 4.0) -> str:
    if shape == "diamond":
        s = size * 1.25
        return (f'<polygon class="pt" points="{x:.1f},{y - s:.1f} {x + s:.1f},{y:.1f} {x:.1f},{y + s:.1f} '
                f'{x - s:.1f},{y:.1f}" fill="{colour}"/>')
    if shape == "square":
        return (f'<rect class="pt" x="{x - size:.1f}" y="{y - size:.1f}" width="{2 * size:.1f}" '
                f'height="{2 * size:.1f}" fill="{colour}"/>')
    return f'<circle class="pt" cx="{x:.1f}" cy="{y:.1f}" r="{size:.1f}" fill="{colour}"/>'


Point = tuple[str, Any, Any, Any, str]  # label, rating, ci_lower, ci_upper, tooltip


def forest_svg(labels: Sequence[str], series: dict[str, list[Point]], chart_id: str, title: str, desc: str,
               width: int = 860, css_class: str = "rating-chart") -> str:
    """Points with horizontal 95% intervals, one row per label, one marker style per series.

    ``series`` maps a method to :data:`Point` rows; rows whose label is not in ``labels`` are skipped.
    """
    index = {m: i for i, m in enumerate(labels)}
    series = {m: [p for p in rows if p[0] in index] for m, rows in series.items()}
    values = [v for rows in series.values() for p in rows for v in p[1:4] if is_num(v)]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    step = _nice_step(hi - lo)
    lo, hi = math.floor(lo / step) * step, math.ceil(hi / step) * step
    hi = hi if hi > lo else lo + step
    k = len(series)
    row_h, top, left = (18 if k == 1 else 24), (12 if k == 1 else 34), 12 + 6.8 * max(
        (len(_short(s, 40)) for s in labels), default=4)
    plot_w, axis_y = width - left - 24, top + row_h * max(len(labels), 1)
    height = axis_y + 42

    def x_of(v: float) -> float:
        return left + (v - lo) / (hi - lo) * plot_w

    cid = _esc(chart_id)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {css_class}" id="{cid}" width="{width}" '
           f'height="{height:.0f}" viewBox="0 0 {width} {height:.0f}" role="img" '
           f'aria-labelledby="{cid}-title {cid}-desc"><title id="{cid}-title">{_esc(title)}</title>'
           f'<desc id="{cid}-desc">{_esc(desc)}</desc>']
    tick = lo
    while tick <= hi + step / 2:
        x = x_of(tick)
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y:.1f}"/>'
                   f'<text class="tick" x="{x:.1f}" y="{axis_y + 16:.1f}" text-anchor="middle">{tick:,.0f}</text>')
        tick += step
    out.append(f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{axis_y + 34:.1f}" '
               'text-anchor="middle">Rating</text>')
    for i, label in enumerate(labels):
        y = top + row_h * i
        if i % 2 == 0:
            out.append(f'<rect class="zebra" x="0" y="{y:.1f}" width="{width}" height="{row_h}"/>')
        out.append(f'<text class="label" x="{left - 8:.1f}" y="{y + row_h / 2 + 4:.1f}" text-anchor="end">'
                   f"<title>{_esc(label)}</title>{_esc(_short(label, 40))}</text>")
    for j, (method, rows) in enumerate(series.items()):
        colour, shape = METHOD_STYLE.get(method, ("#444", "circle"))
        offset = 0.0 if k == 1 else (j - (k - 1) / 2) * 7
        group = f'<g class="series-{_esc(method)}"><title>'
        for label, rating, ci_lower, ci_upper, tip in rows:
            y = top + row_h * index[label] + row_h / 2 + offset
            out.append(f"{group}{escape(tip)}</title>")
            if is_num(ci_lower) and is_num(ci_upper):
                x1, x2 = x_of(ci_lower), x_of(ci_upper)
                out.append(f'<line class="ci" x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}" stroke="{colour}"/>'
                           f'<line class="ci" x1="{x1:.1f}" y1="{y + 3:.1f}" x2="{x1:.1f}" y2="{y - 3:.1f}" '
                           f'stroke="{colour}"/><line class="ci" x1="{x2:.1f}" y1="{y + 3:.1f}" x2="{x2:.1f}" '
                           f'y2="{y - 3:.1f}" stroke="{colour}"/>')
            if is_num(rating):
                out.append(_marker(shape, x_of(rating), y, colour))
            out.append("</g>")
    if k > 1:  # legend
        x = left
        for method in series:
            colour, shape = METHOD_STYLE.get(method, ("#444", "circle"))
            label = METHOD_LABELS.get(method, method)
            out.append(_marker(shape, x + 5, 14, colour) + f'<text class="legend" x="{x + 14:.1f}" y="18">'
                       f"{_esc(label)}</text>")
            x += 26 + 7 * len(label)
    return "".join(out) + "</svg>"


def _points(frame: pl.DataFrame, labels: Sequence[str], names: Sequence[str]) -> list[Point]:
    """Forest points of a board's rows: ``labels`` on the axis, ``names`` in the tooltips."""
    columns = [frame.get_column(c).to_list() for c in ("rating", "ci_lower", "ci_upper", "rank")]
    return [(label, r, lo, hi, f"{name}: rating {_fmt(r)}, 95% CI [{_fmt(lo)}, {_fmt(hi)}], rank {rank}")
            for label, name, r, lo, hi, rank in zip(labels, names, *columns)]


def rating_chart_svg(pub: Published, category: str = "overall", methods: Sequence[str] = ("bt",),
                     max_models: int | None = None, width: int = 860, chart_id: str | None = None) -> str:
    """One category's ratings with 95% intervals (models in the first method's board order,
    limited to ``max_models``; methods absent from the category skipped).

    Raises
    ------
    ValueError
        Unknown category, or none of ``methods`` present in it.
    """
    present = [m for m in methods if m in pub.methods(category)]
    if not present:
        pub.check_board(category, methods[0] if methods else "bt")
    board = pub.board(category, present[0])
    models = (board if max_models is None else board.head(max_models)).get_column("model").to_list()
    series = {}
    for m in present:
        names = pub.board(category, m).get_column("model").to_list()
        series[m] = _points(pub.board(category, m), names, [f"{n} ({METHOD_LABELS.get(m, m)})" for n in names])
    return forest_svg(
        models, series, chart_id or f"rating-{slug(category)}",
        f"Ratings with 95% confidence intervals, {category_label(category)}",
        f"{len(models)} models ordered by {METHOD_LABELS.get(present[0], present[0])} rating; horizontal bars "
        f"are 95% intervals; methods: {', '.join(METHOD_LABELS.get(m, m) for m in present)}.", width)


def profile_chart_svg(ratings: pl.DataFrame, model: str, chart_id: str, width: int = 640) -> str:
    """A model's rating in every category with a board for it (``Published.profile()['ratings']``)."""
    labels = [category_label(c) for c in ratings.get_column("category")]
    return forest_svg(labels, {"bt": _points(ratings, labels, labels)}, chart_id, f"{model}: rating per category",
                      "Rating with its 95% interval in each category (anchored ratings are comparable "
                      "across categories).", width, "rating-chart profile-chart")


def svg_data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,...`` for an SVG string (for Markdown metadata)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


@functools.lru_cache(maxsize=1024)
def _heat(value: float) -> str:
    """Diverging red (0) - near white (0.5) - blue (1)."""
    v = min(max(value, 0.0), 1.0)
    a, b, t = ((178, 24, 43), (247, 247, 247), v / 0.5) if v < 0.5 else ((247, 247, 247), (33, 102, 172),
                                                                        (v - 0.5) / 0.5)
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def heatmap_svg(pub: Published, category: str = "overall", max_models: int = 20,
                chart_id: str | None = None) -> str:
    """Observed win rate of the row model against the column model, for the top ``max_models`` of
    the category's primary board; never-met pairs hatched; '' when the category has no board."""
    if category not in pub.categories():
        return ""
    models = pub.board(category, pub.primary_method(category)).head(max_models).get_column("model").to_list()
    pw = pub.pairwise.filter((pl.col("category") == category) & pl.col("model_1").is_in(models)
                             & pl.col("model_2").is_in(models))
    cells: dict[tuple[str, str], tuple] = {}
    names = {m: escape(m) for m in models}  # escaped once: tooltips name them k times each
    for m1, m2, n, w1, w2, ties, bad, rate, pred in pw.select(
            "model_1", "model_2", "battles", "wins_1", "wins_2", "ties", "both_bad", "win_rate_1",
            "predicted_win_rate_1").iter_rows():
        draws = (ties or 0) + (bad or 0)
        cells[(m1, m2)] = (rate, pred, n, w1, w2, draws)
        cells[(m2, m1)] = (None if rate is None else 1 - rate, None if pred is None else 1 - pred, n, w2, w1, draws)
    cid, k = _esc(chart_id or f"heatmap-{slug(category)}"), len(models)
    cell = 30 if k <= 15 else 24 if k <= 25 else 16
    left = 12 + 7.2 * max((len(_short(s, 32)) for s in models), default=4)
    top = left * 0.71 + 12
    width, height = max(left + cell * k + left * 0.71 + 8, left + 360), top + cell * k + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" id="{cid}" width="{width:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
           f'aria-labelledby="{cid}-title {cid}-desc"><title id="{cid}-title">Pairwise win rates, '
           f'{_esc(category_label(category))}</title><desc id="{cid}-desc">Share of battles the row model won '
           f"against the column model, for the top {k} models by rating; blue: the row model won more often, "
           f'red: less often; grey: never met.</desc><defs><pattern id="{cid}-none" width="6" height="6" '
           'patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" '
           'fill="#e4e4e4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c8c8c8" stroke-width="2"/></pattern></defs>']
    for i, model in enumerate(models):
        y, x = top + cell * i + cell / 2 + 4, left + cell * i + cell / 2 + 4
        name = f"<title>{_esc(model)}</title>{_esc(_short(model, 32))}</text>"
        out.append(f'<text class="label" x="{left - 6:.1f}" y="{y:.1f}" text-anchor="end">{name}'
                   f'<text class="label" x="{x:.1f}" y="{top - 6:.1f}" text-anchor="start" '
                   f'transform="rotate(-45 {x:.1f} {top - 6:.1f})">{name}')
    for i, row in enumerate(models):
        for j, col in enumerate(models):
            x, y = left + cell * j, top + cell * i
            box = f'x="{x:.1f}" y="{y:.1f}" width="{cell}" height="{cell}"'
            c = cells.get((row, col))
            if i == j:
                out.append(f'<rect class="diag" {box}/>')
            elif c is None or c[0] is None:
                out.append(f'<rect class="cell empty" {box} fill="url(#{cid}-none)"><title>'
                           f"{names[row]} vs {names[col]}: no battles</title></rect>")
            else:
                rate, pred, n, w, lost, t = c
                tip = (f"{names[row]} vs {names[col]}: won {rate:.0%} of {n} battles ({w} wins, {lost} losses, "
                       f"{t} ties/both bad){f'; predicted {pred:.0%}' if is_num(pred) else ''}")
                value = (f'<text class="value" x="{x + cell / 2:.1f}" y="{y + cell / 2 + 4:.1f}" text-anchor='
                         f'"middle" fill="{"#ffffff" if abs(rate - 0.5) > 0.3 else "#1a1a1a"}">'
                         f"{round(rate * 100)}</text>") if cell >= 24 else ""
                out.append(f'<g class="cell"><title>{tip}</title><rect {box} fill="{_heat(round(rate, 3))}"/>'
                           f"{value}</g>")
    ly = top + cell * k + 18
    out += [f'<rect x="{left + s * 18:.1f}" y="{ly:.1f}" width="18" height="10" fill="{_heat(s / 10)}"/>'
            for s in range(11)]
    out.append(f'<text class="tick" x="{left:.1f}" y="{ly + 24:.1f}">0%</text><text class="tick" '
               f'x="{left + 99:.1f}" y="{ly + 24:.1f}" text-anchor="middle">50%</text><text class="tick" '
               f'x="{left + 198:.1f}" y="{ly + 24:.1f}" text-anchor="end">100%</text><text class="tick" '
               f'x="{left + 210:.1f}" y="{ly + 9:.1f}">row model\'s win rate</text></svg>')
    return "".join(out)


def _ticks(lo: float, hi: float, n: int = 5) -> tuple[float, float, float]:
    """Axis bounds widened to a nice step, and the step (a flat range gets a span of one step)."""
    step = _nice_step(hi - lo, n)
    lo, hi = math.floor(lo / step) * step, math.ceil(hi / step) * step
    return lo, (hi if hi > lo else lo + step), step


def _tick_label(value: float, step: float) -> str:
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{value:,.{digits}f}"


def benchmark_scatter_svg(points: pl.DataFrame, benchmark: str, category: str, chart_id: str,
                          figures: str = "", width: int = 420, height: int = 320) -> str:
    """Our rating (y, with its 95% interval as a vertical bar) against the benchmark score (x), one
    point per matched model (``Published.benchmark_points``); the model, both values and both ranks
    in each point's title. ``figures``: the agreement in words, appended to the description."""
    scores = points.get_column("score").to_list()
    ratings = [v for c in ("rating", "ci_lower", "ci_upper") for v in points.get_column(c).to_list() if is_num(v)]
    x_lo, x_hi, x_step = _ticks(min(scores, default=0.0), max(scores, default=1.0))
    y_lo, y_hi, y_step = _ticks(min(ratings, default=0.0), max(ratings, default=1.0))
    left, right, top, bottom = 58, 14, 12, 44
    plot_w, plot_h = width - left - right, height - top - bottom

    def x_of(v: float) -> float:
        return left + (v - x_lo) / (x_hi - x_lo) * plot_w

    def y_of(v: float) -> float:
        return top + (y_hi - v) / (y_hi - y_lo) * plot_h

    cid = _esc(chart_id)
    title = f"Rating against {benchmark}, {category_label(category)}"
    desc = (f"{points.height} matched model{'s' if points.height != 1 else ''}: benchmark score across, "
            f"rating up, vertical bars are 95% intervals of the rating. {figures}").strip()
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart benchmark-scatter" id="{cid}" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-labelledby="{cid}-title {cid}-desc" '
           f'data-benchmark="{_esc(benchmark)}"><title id="{cid}-title">{_esc(title)}</title>'
           f'<desc id="{cid}-desc">{_esc(desc)}</desc>'
           f'<rect class="frame" x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none"/>']
    for i in range(round((x_hi - x_lo) / x_step) + 1):
        v = x_lo + i * x_step
        x = x_of(v)
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}"/>'
                   f'<text class="tick" x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">'
                   f"{_tick_label(v, x_step)}</text>")
    for i in range(round((y_hi - y_lo) / y_step) + 1):
        v = y_lo + i * y_step
        y = y_of(v)
        out.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{_tick_label(v, y_step)}</text>")
    out.append(f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
               f'{_esc(_short(benchmark, 40))} score</text><text class="axis-label" x="14" y="{top + plot_h / 2:.1f}" '
               f'text-anchor="middle" transform="rotate(-90 14 {top + plot_h / 2:.1f})">Rating</text>')
    colour = METHOD_STYLE["bt"][0]
    for model, score, rating, lo, hi, ours, theirs in points.select(
            "model", "score", "rating", "ci_lower", "ci_upper", "our_rank", "benchmark_rank").iter_rows():
        x = x_of(score)
        tip = (f"{model}: {benchmark} {score:,.4g}, rating {_fmt(rating)} (95% CI [{_fmt(lo)}, {_fmt(hi)}]); "
               f"rank {ours} here, {theirs} on {benchmark} among the matched models")
        bar = (f'<line class="ci" x1="{x:.1f}" y1="{y_of(lo):.1f}" x2="{x:.1f}" y2="{y_of(hi):.1f}" stroke="{colour}"/>'
               if is_num(lo) and is_num(hi) else "")
        out.append(f'<g class="point" data-model="{_esc(model)}"><title>{_esc(tip)}</title>{bar}'
                   f'<circle class="pt" cx="{x:.1f}" cy="{y_of(rating):.1f}" r="4" fill="{colour}"/></g>')
    return "".join(out) + "</svg>"
