"""Markdown for Dagster metadata: a board's top rows, the overall ratings chart, and small tables."""

from __future__ import annotations

import polars as pl

from arena_pipeline.core.dataset.categories import category_label
from arena_pipeline.core.labels import PRIMARY_METHOD, PROVISIONAL_RANK, STYLE_METHODS
from arena_pipeline.core.ranking import method_label
from arena_pipeline.presentation.charts import rating_chart_svg, svg_data_uri
from arena_pipeline.presentation.read import PublicationView
from arena_pipeline.presentation.tables import frame_table, markdown_escape


def top_n_markdown(pub: PublicationView, category: str = "overall", method: str = PRIMARY_METHOD, n: int = 10) -> str:
    """The first ``n`` rows of one board (shown models, then provisional ones) as a Markdown table.

    Columns ``Rank`` (a provisional model's marked ``prov. N``: its place among every model of the
    board, ``core.labels.rank_label``), ``UB`` (best rank the interval allows), ``Model`` (``|`` escaped), ``Rating``,
    ``95% CI`` (``−below/+above`` the rating, whole points, so a row fits the UI's metadata panel on
    a 1400 px screen; the interval of the rating's difference from the reference model, which shows
    ``reference``), ``Battles``; numbers right-aligned, ``–`` for a missing or NaN value.

    Raises
    ------
    ValueError
        Unknown category or a method absent from it (the message lists the valid ones).
    """
    pub.check_board(category, method)
    board = pub.board(category, method).head(n)
    rating, lower, upper = (pl.col(c).fill_nan(None) for c in ("rating", "ci_lower", "ci_upper"))
    below, above = (d.round(0).cast(pl.Int64, strict=False) for d in (rating - lower, upper - rating))
    has_interval = pl.col("ci_method") != "none" if "ci_method" in board.columns else pl.lit(False)
    pinned = lower.is_null() & upper.is_null() & has_interval
    ci = (pl.when(pinned).then(pl.lit("reference"))  # the reference model: its rating is pinned
          .when(lower.is_infinite() | upper.is_infinite()).then(pl.lit("unbounded"))
          .otherwise(pl.format("−{}/+{}", below, above)))  # else a null bound leaves the cell empty
    provisional = pl.col("provisional") if "provisional" in board.columns else pl.lit(False)
    rank = (pl.when(provisional).then(pl.format(PROVISIONAL_RANK.format(rank="{}"), "rank"))
            .otherwise(pl.col("rank").cast(pl.String)))
    rows = board.select(Rank=rank, UB="rank_ub", Model="model", Rating=rating, **{"95% CI": ci},
                        Battles="n_battles")
    table = frame_table(rows, "pipe", markdown_escape, floatfmt=",.1f", intfmt=("", "", "", "", "", ","),
                        missingval="–", colalign=("right", "right", "left", "right", "left", "right"))
    title = f"**{category_label(category)}: {method_label(method)}** (top {board.height})"
    return f"{title}\n\n{table}"


def overall_chart_markdown(pub: PublicationView, max_models: int = 25) -> str | None:
    """The overall board's ratings (the primary method and the style-controlled ones) as an inline image, or None without one."""
    if "overall" not in pub.categories():
        return None
    chart = rating_chart_svg(pub, "overall", (PRIMARY_METHOD, *STYLE_METHODS), max_models=max_models)
    return f"![overall ratings with 95% CI]({svg_data_uri(chart)})"


def board_previews(pub: PublicationView, n: int = 10) -> dict[str, str]:
    """``top10_<category>`` per category with a board of the primary method, and ``overall_ratings_chart``."""
    out = {f"top{n}_{c}": top_n_markdown(pub, c, PRIMARY_METHOD, n) for c in pub.categories()
           if PRIMARY_METHOD in pub.methods(c)}
    chart = overall_chart_markdown(pub)
    return out | ({"overall_ratings_chart": chart} if chart else {})


def frame_markdown(frame: pl.DataFrame) -> str:
    """A small frame as a Markdown table (floats to 3 decimals; text never read as a number, ``|``
    escaped), or "no category in common" when empty."""
    if frame.is_empty():
        return "no category in common"
    return frame_table(frame, "pipe", markdown_escape, floatfmt=".3f")
