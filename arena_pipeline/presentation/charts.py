"""Inline SVG charts (no external references): scales and colours here, the markup in templates/charts.svg.j2."""

from __future__ import annotations

import base64
import functools
import itertools
import math
import sys
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import polars as pl

from arena_pipeline.core.dataset.categories import category_label
from arena_pipeline.core.labels import METHODS, PRIMARY_METHOD, method_label
from arena_pipeline.presentation.read import PublicationView
from arena_pipeline.presentation.templating import ci_title, environment, is_finite, is_num, slug

#: Marker colours and shapes of the methods, in board order (colour-blind safe; the template draws the shapes).
_PALETTE: tuple[tuple[str, str], ...] = (("#1f5fa8", "circle"), ("#b5500b", "diamond"), ("#4d7a2a", "square"))
#: Marker colour and shape of each built-in method, by its place in board order (``core.labels.METHODS``).
METHOD_STYLE: dict[str, tuple[str, str]] = dict(zip(METHODS, _PALETTE, strict=False))
_CI = ("rating", "ci_lower", "ci_upper")


def svg_data_uri(svg: str) -> str:
    """``data:image/svg+xml;base64,...`` for an SVG string (for Markdown metadata)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _macros() -> Any:
    """The chart macros of ``templates/charts.svg.j2``."""
    return environment().get_template("charts.svg.j2").module


def _axis(values: list[float], ticks: int, start: float, length: float) -> tuple[Callable, list[tuple]]:
    """A scale from the range of the finite ``values`` onto ``start`` .. ``start + length`` (a position
    rounded to 0.1, None for a non-number, an infinite one or one off the drawable range), and its
    (position, label) ticks.

    The range is widened to multiples of a nice step (1, 2, 2.5 or 5 times a power of ten); a flat range
    (equal values, or differences below 1e-9 of their size) is drawn in the middle of an axis as wide
    as its order of magnitude (2e6: 1.4e6 .. 2.4e6). Any finite values draw, up to +-1.8e308: the bounds
    are counted in steps (integers), never computed as floats that could overflow, and labels are
    exact decimals (plain with thousands separators below 1e9, in e-notation above).
    """
    finite = [float(v) for v in values if is_finite(v)]
    lo, hi = min(finite, default=0.0), max(finite, default=1.0)
    size = max(1.0, abs(lo), abs(hi))
    flat = hi - lo <= 1e-9 * size  # hi - lo may overflow to inf: not flat
    raw = 10.0 ** math.floor(math.log10(size)) / ticks if flat else min(hi / ticks - lo / ticks, sys.float_info.max)
    power = math.floor(math.log10(raw))
    mult = next((m for m in (1, 2, 2.5, 5) if m * 10.0 ** power >= raw), None)
    mult, power = (mult, power) if mult is not None else (1, power + 1)
    half = power // 2  # v / step as two divisions by powers of ten that are floats (10.0 ** 309 is not)

    def steps(v: float) -> float:
        return v / 10.0 ** half / 10.0 ** (power - half) / mult

    if flat:
        first = math.floor(steps(lo) - ticks / 2)
        last = first + ticks
    else:
        first, last = math.floor(steps(lo)), math.ceil(steps(hi))
        last = max(last, first + 1)
    per = length / (last - first)

    def at(v: Any) -> float | None:
        if not is_finite(v):
            return None
        position = start + (steps(float(v)) - first) * per
        return round(position, 1) if math.isfinite(position) else None

    step = Decimal(str(mult)).scaleb(power)
    exponent = step.normalize().as_tuple().exponent
    top = max(abs(first), abs(last)) * step

    def label(k: int) -> str:
        value = k * step
        if top < 10**9:
            return f"{value:,.{max(0, -exponent)}f}"
        return "0" if k == 0 else f"{value:.{max(0, top.adjusted() - exponent)}e}"

    return at, [(round(start + (k - first) * per, 1), label(k)) for k in range(first, last + 1)]


def _forest(series: dict[str, tuple[pl.DataFrame, list[str], list[str]]], labels: list[str], chart_id: str,
            title: str, desc: str, width: int, css_class: str) -> str:
    """Points with horizontal 95% intervals, a row per label, a marker style per method: ``series`` maps a
    method to a board, its rows' labels (rows not in ``labels`` skipped) and their names in the tooltips."""
    k, left = len(series), 12 + 6.8 * max((min(len(s), 40) for s in labels), default=4)
    row_h, top = (18, 12) if k == 1 else (24, 34)
    ys = {label: top + row_h * (i + 0.5) for i, label in enumerate(labels)}
    rows = {m: [r for r in zip(shown, names, *(board.get_column(c).to_list() for c in (*_CI, "rank")),
                               _ci_methods(board), strict=True) if r[0] in ys]
            for m, (board, shown, names) in series.items()}
    x, ticks = _axis([v for r in itertools.chain(*rows.values()) for v in r[2:5] if is_finite(v)], 6, left,
                     width - left - 24)
    # each legend entry starts where the previous one's label ends (the last end is not used)
    legend = [*itertools.accumulate((26 + 7 * len(method_label(m)) for m in rows), initial=left)][:-1]
    drawn = [(m, *METHOD_STYLE.get(m, ("#444", "circle")), legend_x, [
        (name, rating, ci_title(lo, hi, how), rank, x(rating), x(lo), x(hi), ys[label] + (j - (k - 1) / 2) * 7)
        for label, name, rating, lo, hi, rank, how in rows[m]]) for j, (m, legend_x)
             in enumerate(zip(rows, legend, strict=True))]
    return str(_macros().forest(chart_id, css_class, width, title, desc, list(ys.items()), ticks, drawn, left, top,
                                 row_h))


def _ci_methods(board: pl.DataFrame) -> list[str | None]:
    """Each row's ``ci_method`` (None without the column): tells the reference model from a board without intervals."""
    return board.get_column("ci_method").to_list() if "ci_method" in board.columns else [None] * board.height


#: The mark of a provisional model's row on the interval chart (before the name: a long name is cut at its end).
PROVISIONAL_LABEL = "(prov.)"


def rating_chart_svg(pub: PublicationView, category: str = "overall", methods: Sequence[str] = (PRIMARY_METHOD,),
                     max_models: int | None = None, width: int = 860, chart_id: str | None = None) -> str:
    """One category's ratings with 95% intervals: models in the first method's board order, at most
    ``max_models``; methods absent from the category skipped (ValueError: unknown category, or none present)."""
    present = [m for m in methods if m in pub.methods(category)]
    if not present:
        pub.check_board(category, methods[0] if methods else PRIMARY_METHOD)
    boards, names = {m: pub.board(category, m) for m in present}, {m: method_label(m) for m in present}
    board = boards[present[0]]
    # a provisional model (below the display threshold, after the ranked ones) is labelled so, as on the tables
    provisional = set(board.filter("provisional").get_column("model")) if "provisional" in board.columns else set()
    label = {m: f"{PROVISIONAL_LABEL} {m}" if m in provisional else m for m in board.get_column("model")}
    shown = (board if max_models is None else board.head(max_models)).get_column("model").to_list()
    models = [label[m] for m in shown]
    series = {m: (b, [label.get(s, s) for s in b["model"]], [f"{s} ({names[m]})" for s in b["model"]])
              for m, b in boards.items()}
    n_prov = len(provisional.intersection(shown))
    return _forest(series, models, chart_id or f"rating-{slug(category)}",
                   f"Ratings with 95% confidence intervals, {category_label(category)}",
                   f"{len(models)} models ordered by {names[present[0]]} rating; horizontal bars are 95% intervals; "
                   f"methods: {', '.join(names.values())}"
                   + (f"; {PROVISIONAL_LABEL}: {n_prov} provisional models (fewer battles than the display threshold, "
                      "not ranked among the others)" if n_prov else "") + ".", width, "rating-chart")


def profile_chart_svg(ratings: pl.DataFrame, model: str, chart_id: str, width: int = 640) -> str:
    """A model's rating in every category with a board for it (``PublicationView.profile()['ratings']``)."""
    labels = [category_label(c) for c in ratings.get_column("category")]
    return _forest({PRIMARY_METHOD: (ratings, labels, labels)}, labels, chart_id, f"{model}: rating per category",
                   "Rating with its 95% interval in each category (anchored ratings are comparable across "
                   "categories).", width, "rating-chart profile-chart")


@functools.cache
def _ramp() -> list[str]:
    """The win-rate colour of 0, 0.001, ..., 1: red - near white - blue (diverging)."""
    channels = ((178, 247, 33), (24, 247, 102), (43, 247, 172))  # red, green, blue at 0, 0.5 and 1
    rgb = np.rint([np.interp(np.linspace(0, 1, 1001), (0, 0.5, 1), c) for c in channels]).astype(int)
    return [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in rgb.T.tolist()]


def heatmap_svg(pub: PublicationView, category: str = "overall", max_models: int = 20,
                chart_id: str | None = None) -> str:
    """Observed win rate of the row model against the column model, for the top ``max_models`` (0: all) of
    the category's primary board; never-met pairs hatched; '' when the category has no board."""
    if category not in pub.categories():
        return ""
    board = pub.board(category, pub.primary_method(category))
    models = board.head(max_models or board.height).get_column("model").to_list()  # 0: every model
    pairs = pub.pairwise.filter((pl.col("category") == category) & pl.col("model_1").is_in(models)
                                & pl.col("model_2").is_in(models) & pl.col("win_rate_1").is_not_null())
    cells, ramp = {}, _ramp()
    for a, b, rate, pred, n, won, lost, ties, bad in pairs.select(
            "model_1", "model_2", "win_rate_1", "predicted_win_rate_1", "battles", "wins_1", "wins_2", "ties",
            "both_bad").rows():  # a cell each way: (colour, rate, predicted, battles, wins, losses, draws)
        pred, draws = (pred if is_num(pred) else None), (ties or 0) + (bad or 0)
        cells[a, b] = (ramp[round(rate * 1000)], rate, pred, n, won, lost, draws)
        cells[b, a] = (ramp[round(1000 - rate * 1000)], 1 - rate, None if pred is None else 1 - pred, n, lost, won,
                       draws)
    grid = [[(j, *cells.get((row, col), (None,) * 7)) for j, col in enumerate(models)] for row in models]
    k, left = len(models), 12 + 7.2 * max((min(len(s), 32) for s in models), default=4)
    return str(_macros().heatmap(chart_id or f"heatmap-{slug(category)}", category_label(category), models, grid,
                                 30 if k <= 15 else 24 if k <= 25 else 16, left, left * 0.71 + 12, ramp[::100]))


def benchmark_scatter_svg(points: pl.DataFrame, benchmark: str, category: str, chart_id: str,
                          figures: str = "", width: int = 420, height: int = 320) -> str:
    """Our rating (y, with its 95% interval as a vertical bar) against the benchmark score (x), one
    point per matched model (``PublicationView.benchmark_points``); the model, both values and both ranks
    in each point's title. ``figures``: the agreement in words, appended to the description."""
    plot = (58, 12, width - 72, height - 56)  # left, top, width, height of the plotting area
    columns = ("model", "score", *_CI, "our_rank", "benchmark_rank")
    rows = list(zip(*(points.get_column(c).to_list() for c in columns), strict=True))
    x, x_ticks = _axis([r[1] for r in rows], 5, plot[0], plot[2])
    y, y_ticks = _axis([v for r in rows for v in r[2:5] if is_finite(v)], 5, plot[1] + plot[3], -plot[3])
    drawn = [(r[0], r[1], r[2], ci_title(r[3], r[4]), *r[5:], x(r[1]), y(r[2]), y(r[3]), y(r[4])) for r in rows]
    return str(_macros().scatter(chart_id, benchmark, category_label(category), figures, width, height, plot,
                                 x_ticks, y_ticks, drawn, METHOD_STYLE[PRIMARY_METHOD][0]))


#: Marker colour and shape of the calibration chart's predictors (``arena.model_fit_calibration.predictor``).
PREDICTOR_STYLE: dict[str, tuple[str, str, str]] = {
    PRIMARY_METHOD: (METHOD_STYLE[PRIMARY_METHOD][0], "circle", method_label(PRIMARY_METHOD)), "win_rate": ("#6b6b6b", "square", "Win rates"),
}


def calibration_chart_svg(calibration: pl.DataFrame, category: str, chart_id: str, size: int = 300) -> str:
    """Held-out calibration of one board (its ``arena.model_fit_calibration`` rows): per decile of the
    predictions, the favourite's predicted (across) against its observed (up, with its 95% interval)
    expected score (a draw counting 1/2), one series per predictor, the diagonal for a perfect calibration. Both
    axes share one range (from the data, 0.5 included), so the diagonal is at 45 degrees. '' without rows."""
    if calibration.is_empty():
        return ""
    plot = (54, 28, size - 70, size - 70)  # left, top, width, height of the (square) plotting area
    lows = calibration.get_column("observed_lower").to_list()
    highs = [*calibration.get_column("observed_upper").to_list(), *calibration.get_column("predicted").to_list()]
    values = [v for v in (0.5, *lows, *highs) if is_finite(v)]
    x, ticks = _axis(values, 4, plot[0], plot[2])
    y, y_ticks = _axis(values, 4, plot[1] + plot[3], -plot[3])
    series = []
    for name, (colour, shape, label) in PREDICTOR_STYLE.items():
        rows = calibration.filter(pl.col("predictor") == name).sort("decile")
        points = [(r["decile"], r["battles"], r["predicted"], r["observed"], r["observed_lower"], r["observed_upper"],
                   x(r["predicted"]), y(r["observed"]), y(r["observed_lower"]), y(r["observed_upper"]))
                  for r in rows.iter_rows(named=True)]
        if points:
            series.append((name, label, colour, shape, points))
    diagonal = (ticks[0][0], y_ticks[0][0], ticks[-1][0], y_ticks[-1][0])  # one scale on both axes
    return str(_macros().calibration(chart_id, category_label(category), size, plot, ticks, y_ticks, diagonal,
                                     series))
