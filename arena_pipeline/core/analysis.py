"""Analysis tables built from the flat tables: position bias and monthly rating trends.

Pure Polars (plus SciPy's exact binomial test); no Dagster imports. Every function takes
the published frames (``arena.battles``, ``arena.battle_categories``) and
returns one frame whose columns and types are pinned by a ``*_SCHEMA`` dict of this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import polars as pl
from scipy.stats import binomtest

from arena_pipeline.core.dataset.categories import category_order
from arena_pipeline.core.ranking import RankingConfig, compute_rankings

#: Columns and types of :func:`position_bias`.
POSITION_BIAS_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "battles": pl.Int64(),
    "a_wins": pl.Int64(),
    "b_wins": pl.Int64(),
    "ties": pl.Int64(),
    "both_bad": pl.Int64(),
    "decisive": pl.Int64(),
    "a_win_rate": pl.Float64(),
    "ci_lower": pl.Float64(),
    "ci_upper": pl.Float64(),
    "p_value": pl.Float64(),
}

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


def position_bias(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Win rate of the model shown on the left (side A) against the right (side B), per category.

    If voters had no position preference, side A would win half of the decisive votes (the
    sides are assigned at random). ``a_win_rate`` is ``a_wins / decisive``; the interval is
    the exact Clopper-Pearson interval of that proportion and ``p_value`` the exact two-sided
    binomial test of ``a_win_rate = 0.5``, both from ``scipy.stats.binomtest`` (one call per
    category).

    Parameters
    ----------
    battles
        ``id`` and ``winner`` (``model_a`` / ``model_b`` / ``tie`` / ``both_bad``). Rows with
        another or a null winner are ignored. Self-battles (the same model on both sides) are
        kept: they measure position bias with no model difference at all.
    battle_categories
        ``battle_id``, ``category``; one row per battle and category (see
        ``categories.tag_categories``); duplicates are counted once.
    confidence
        Level of ``ci_lower``/``ci_upper``.

    Returns
    -------
    pl.DataFrame
        :data:`POSITION_BIAS_SCHEMA`, one row per category present (board order, ``categories.ordered_categories``
        order, unknown names after). ``battles`` counts all four outcomes, ``decisive =
        a_wins + b_wins``; ``a_win_rate``, ``ci_lower``, ``ci_upper`` and ``p_value`` are null
        when ``decisive`` is 0.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    winner = pl.col("winner")
    counts = (
        battle_categories.select(pl.col("battle_id", "category").cast(pl.String))
        .unique()
        .join(
            battles.select(pl.col("id").cast(pl.String).alias("battle_id"), "winner").filter(
                winner.is_in(["model_a", "model_b", "tie", "both_bad"]).fill_null(False)
            ),
            on="battle_id",
            how="inner",
        )
        .group_by("category")
        .agg(
            battles=pl.len().cast(pl.Int64),
            a_wins=(winner == "model_a").sum().cast(pl.Int64),
            b_wins=(winner == "model_b").sum().cast(pl.Int64),
            ties=(winner == "tie").sum().cast(pl.Int64),
            both_bad=(winner == "both_bad").sum().cast(pl.Int64),
        )
        .with_columns(decisive=pl.col("a_wins") + pl.col("b_wins"))
        .sort(category_order(), "category")
    )
    exact = [_exact_binomial(k, n, confidence)
             for k, n in counts.select("a_wins", "decisive").iter_rows()]  # one row per category
    lower, upper, p_value = np.array(exact, dtype=np.float64).reshape(-1, 3).T
    return counts.with_columns(
        (pl.col("a_wins") / pl.col("decisive")).alias("a_win_rate"),
        pl.Series("ci_lower", lower, dtype=pl.Float64),
        pl.Series("ci_upper", upper, dtype=pl.Float64),
        pl.Series("p_value", p_value, dtype=pl.Float64),
    ).select([pl.col(c).fill_nan(None).cast(t) if t == pl.Float64() else pl.col(c).cast(t)
              for c, t in POSITION_BIAS_SCHEMA.items()])


def _exact_binomial(k: int, n: int, confidence: float) -> tuple[float, float, float]:
    """Clopper-Pearson interval and two-sided p-value of ``k`` successes in ``n`` against p = 0.5."""
    if n == 0:
        return (np.nan, np.nan, np.nan)
    test = binomtest(k, n, 0.5)
    interval = test.proportion_ci(confidence_level=confidence, method="exact")
    return (interval.low, interval.high, test.pvalue)


#: Defaults of :func:`rating_trend`: Bradley-Terry only, sandwich intervals, 50 battles/month.
#: (Every model kept is shown and ranked, and months are centred, as documented below.)
TREND_CONFIG = RankingConfig(
    methods=("bt",), bootstrap_rounds=0, min_battles=50, display_min_battles=0, anchor_models=()
)

_KEY_SEPARATOR = "\x1f"  # joins category and month into one board name for compute_rankings


def rating_trend(
    battles: pl.DataFrame,
    battle_categories: pl.DataFrame,
    config: RankingConfig | None = None,
    categories: Sequence[str] | None = ("overall",),
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
        sandwich 95% intervals). ``methods`` is always replaced by ``("bt",)``; use
        ``bootstrap_rounds > 0`` for bootstrap intervals (slower). Set ``anchor_model`` to a
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
    config = dataclasses.replace(config or TREND_CONFIG, methods=("bt",))
    tags = battle_categories.select("battle_id", "category")
    if categories is not None:
        tags = tags.filter(pl.col("category").is_in(list(categories)))
    months = battles.select(
        "id", month=pl.col("timestamp").dt.truncate("1mo").cast(pl.Date)
    ).filter(pl.col("month").is_not_null())
    keyed = tags.join(months, left_on="battle_id", right_on="id", how="inner").select(
        "battle_id",
        category=pl.col("category") + _KEY_SEPARATOR + pl.col("month").cast(pl.String),
    )
    if keyed.height == 0:
        return pl.DataFrame(schema=RATING_TREND_SCHEMA)
    fitted = compute_rankings(
        battles.select("id", "model_a", "model_b", "winner"), keyed, config
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
