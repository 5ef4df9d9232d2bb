"""Monthly rating trends: one Bradley-Terry board per category and month, months chained on shared models."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import polars as pl

from arena_pipeline.core.dataset.categories import category_order
from arena_pipeline.core.labels import PRIMARY_METHOD
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows

#: Columns and types of :func:`rating_trend`.
RATING_TREND_SCHEMA: dict[str, pl.DataType] = {
    "month": pl.Date(),
    "category": pl.String(),
    "model": pl.String(),
    "rating": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
    "rank": pl.Int64(),
    "n_battles": pl.Int64(),
    # models shared with the category's previous month that linked this month's scale to it
    # (null: the first month; 0: nothing shared, the month is centred on its own field)
    "linked_models": pl.Int64(),
}


TREND_CONFIG = RankingConfig(
    methods=(PRIMARY_METHOD,), bootstrap_rounds=0, min_battles=50, display_min_battles=0, anchor_models=()
)

#: The categories :func:`rating_trend` computes by default.
TREND_CATEGORIES: tuple[str, ...] = ("overall",)

_KEY_SEPARATOR = "\x1f"  # joins category and month into one board name for compute_rankings


def rating_trend(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    config: RankingConfig | None = None,
    categories: Sequence[str] | None = TREND_CATEGORIES,
    chain: bool = True,
) -> pl.DataFrame:
    """Bradley-Terry ratings per calendar month (UTC) and category.

    Every (category, month) is an independent board fitted by
    :func:`arena_pipeline.core.ranking.compute_rankings` on that month's battles alone, in
    one call (each board's name is the category and the month). A model is on a month's board
    when it has at least ``config.min_battles`` battles that month against the other models
    kept (and a finite maximum-likelihood rating); otherwise it has no row that month.

    Parameters
    ----------
    battles
        ``id``, ``model_a``, ``model_b``, ``winner``, ``timestamp``. Battles with a null
        timestamp are left out.
    battle_categories
        ``battle_id``, ``category``.
    config
        Ranking settings; default :data:`TREND_CONFIG` (``min_battles=50``, no bootstrap:
        sandwich 95% intervals). ``methods`` is always replaced by the primary method alone
        (``core.labels.PRIMARY_METHOD``); use ``bootstrap_rounds > 0`` for bootstrap intervals (slower). Set ``anchor_model`` to a
        model present in every month for an absolute reference (no chaining then).
    categories
        Categories to compute; None for every category in ``battle_categories``.
    chain
        Anchoring across months (see Notes); False: every month centred on its own field.

    Returns
    -------
    pl.DataFrame
        :data:`RATING_TREND_SCHEMA`: ``month`` is the first day of the month; ``ci_lower``/
        ``ci_upper`` the board's primary interval; ``rank`` within the month's board;
        ``n_battles`` the model's battles used by that month's fit; ``linked_models`` how many
        models linked the month to the one before. Sorted by category
        (board order, ``categories.ordered_categories`` order), month, rank, model.

    Notes
    -----
    Bradley-Terry ratings are identified only up to a constant, and each month is fitted on its
    own, so each month comes out on its own scale (centred on ``anchor_rating`` over that month's
    field). Across several dumps (2023 to 2025) the field changes completely, and centred months
    would show every model drifting down as stronger models arrive. With ``chain`` (and no
    ``anchor_model``), months are linked in order: the first month of a category stays centred;
    each later month is shifted by one constant, the median over the models it shares with the
    previous month of (previous, already linked, rating - this month's rating). A model's
    month-to-month change is then measured against the models that stayed, not against the
    month's field; the median (not the mean) keeps a minority of shared models that really
    changed from moving the scale (with the mean, one drifter among six shared models loses a
    sixth of its drift: tested on synthetic months in test_analysis.py). The
    shift moves the interval bounds too (the offset's own uncertainty is not added). A month
    sharing no model with the previous one restarts the chain (centred, ``linked_models`` 0).
    """
    config = dataclasses.replace(config or TREND_CONFIG, methods=(PRIMARY_METHOD,))
    keyed = _month_boards(battles, battle_categories, categories)
    if keyed.height == 0:
        return pl.DataFrame(schema=RATING_TREND_SCHEMA)
    fitted = compute_rankings(
        battles.select("id", "model_a", "model_b", "winner"), tag_rows(battles.get_column("id"), [keyed]), config
    ).leaderboard
    if fitted.height == 0:
        return pl.DataFrame(schema=RATING_TREND_SCHEMA)
    parts = pl.col("category").str.split_exact(_KEY_SEPARATOR, 1)
    fitted = fitted.with_columns(
        month=parts.struct.field("field_1").str.to_date("%Y-%m-%d"),
        category=parts.struct.field("field_0"),
    )
    fitted = chain_months(fitted) if chain and config.anchor_model is None else \
        fitted.with_columns(linked_models=pl.lit(None, pl.Int64))
    return (
        fitted.sort(category_order(), "category", "month", "rank", "model")
        .select([pl.col(c).cast(t) for c, t in RATING_TREND_SCHEMA.items()])
    )


def _month_boards(battles: pl.DataFrame, battle_categories: pl.DataFrame,
                  categories: Sequence[str] | None) -> pl.DataFrame:
    """``battle_id`` and the board of its (category, month) as ``category`` (``<category>|<month>``), for
    the battles with a timestamp in ``categories`` (None: all)."""
    tags = battle_categories.select("battle_id", "category")
    if categories is not None:
        tags = tags.filter(pl.col("category").is_in(list(categories)))
    months = battles.select(
        "id", month=pl.col("timestamp").dt.truncate("1mo").cast(pl.Date)
    ).filter(pl.col("month").is_not_null())
    return tags.join(months, left_on="battle_id", right_on="id", how="inner").select(
        "battle_id",
        category=pl.col("category") + _KEY_SEPARATOR + pl.col("month").cast(pl.String),
    )


def chain_months(boards: pl.DataFrame) -> pl.DataFrame:
    """Link monthly boards (``month``, ``category``, ``model``, ``rating``, ``ci_lower``,
    ``ci_upper``): each month shifted by the median rating change of the models it shares with
    the month before.

    See :func:`rating_trend`'s Notes. Adds ``linked_models``. The loop runs over months (a few
    dozen), each step a vectorised join.
    """
    out = []
    for (_category,), frame in boards.partition_by("category", as_dict=True, maintain_order=True).items():
        previous: pl.DataFrame | None = None
        for month in sorted(frame.get_column("month").unique().to_list()):
            board = frame.filter(pl.col("month") == month)
            if previous is None:
                offset, linked = 0.0, None
            else:
                shared = board.join(previous.select("model", prev="rating"), on="model", how="inner")
                linked = shared.height
                offset = float((shared["prev"] - shared["rating"]).median()) if linked else 0.0
            board = board.with_columns(
                [(pl.col(c) + offset).alias(c) for c in ("rating", "ci_lower", "ci_upper")],
                linked_models=pl.lit(linked, pl.Int64),
            )
            out.append(board)
            previous = board
    return pl.concat(out) if out else boards.with_columns(linked_models=pl.lit(None, pl.Int64))
