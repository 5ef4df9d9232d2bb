"""Markdown for Dagster metadata: a board's top rows, the overall ratings chart, and small tables."""

from __future__ import annotations

import polars as pl

from arena_pipeline.core.categories import category_label
from arena_pipeline.presentation.charts import is_num, rating_chart_svg, svg_data_uri
from arena_pipeline.presentation.read import METHOD_LABELS, Published


def top_n_markdown(pub: Published, category: str = "overall", method: str = "bt", n: int = 10) -> str:
    """The first ``n`` rows of one board (shown models, then provisional ones) as a Markdown table.

    Columns ``Rank``, ``UB`` (best rank the interval allows), ``Model``, ``Rating``, ``95% CI``
    (``−below/+above`` the rating, whole points, so a row fits the UI's metadata panel on a
    1400 px screen), ``Battles``.

    Raises
    ------
    ValueError
        Unknown category or a method absent from it (the message lists the valid ones).
    """
    pub.check_board(category, method)
    board = pub.board(category, method).head(n)
    lines = [f"**{category_label(category)}: {METHOD_LABELS.get(method, method)}** (top {board.height})", "",
             "| Rank | UB | Model | Rating | 95% CI | Battles |", "| ---: | ---: | --- | ---: | --- | ---: |"]
    for r in board.iter_rows(named=True):
        lo, hi, rating = r.get("ci_lower"), r.get("ci_upper"), r.get("rating")
        ci = f"−{rating - lo:.0f}/+{hi - rating:.0f}" if all(map(is_num, (lo, hi, rating))) else "–"
        battles = f"{r['n_battles']:,}" if isinstance(r.get("n_battles"), int) else "–"
        lines.append(f"| {r['rank']} | {r['rank_ub'] if r.get('rank_ub') is not None else '–'} | "
                     f"{str(r['model']).replace('|', chr(92) + '|')} | "
                     f"{f'{rating:,.1f}' if is_num(rating) else '–'} | {ci} | {battles} |")
    return "\n".join(lines)


def overall_chart_markdown(pub: Published, max_models: int = 25) -> str | None:
    """The overall board's ratings (bt and bt_style) as an inline image, or None without one."""
    if "overall" not in pub.categories():
        return None
    chart = rating_chart_svg(pub, "overall", ("bt", "bt_style"), max_models=max_models)
    return f"![overall ratings with 95% CI]({svg_data_uri(chart)})"


def board_previews(pub: Published, n: int = 10) -> dict[str, str]:
    """``top10_<category>`` per category with a bt board, and ``overall_ratings_chart``."""
    out = {f"top{n}_{c}": top_n_markdown(pub, c, "bt", n) for c in pub.categories() if "bt" in pub.methods(c)}
    chart = overall_chart_markdown(pub)
    return out | ({"overall_ratings_chart": chart} if chart else {})


def frame_markdown(frame: pl.DataFrame) -> str:
    """A small frame as a Markdown table (floats to 3 decimals), or "no category in common" when empty."""
    if frame.is_empty():
        return "no category in common"
    header = "| " + " | ".join(frame.columns) + " |\n|" + "---|" * frame.width + "\n"
    rows = "\n".join(
        "| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |"
        for row in frame.iter_rows()
    )
    return header + rows
