"""Per-category head-to-head table: observed results and Bradley-Terry predictions per pair."""

from __future__ import annotations

import polars as pl

#: Columns and types of ``RankingOutput.pairwise``.
PAIRWISE_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String(),
    "model_1": pl.String(),
    "model_2": pl.String(),
    "battles": pl.Int64(),
    "wins_1": pl.Int64(),
    "wins_2": pl.Int64(),
    "ties": pl.Int64(),
    "both_bad": pl.Int64(),
    "win_rate_1": pl.Float64(),
    "predicted_win_rate_1": pl.Float64(),
}


def pairwise_table(
    category_battles: pl.DataFrame,
    bt_ratings: pl.DataFrame,
    ties: str = "half",
    scale: float = 400.0,
    base: float = 10.0,
) -> pl.DataFrame:
    """Head-to-head results per category and unordered model pair.

    Parameters
    ----------
    category_battles
        One row per (category, battle) with ``category``, ``model_a``, ``model_b``,
        ``winner``; self-battles removed.
    bt_ratings
        ``category``, ``model``, ``rating``: the Bradley-Terry board of each category.
    ties
        ``"half"``: ``win_rate_1`` counts a tie or both_bad as half a win each way;
        ``"drop"``: ``win_rate_1 = wins_1 / (wins_1 + wins_2)``.
    scale, base
        Rating scale of ``bt_ratings``.

    Returns
    -------
    pl.DataFrame
        :data:`PAIRWISE_SCHEMA`. ``model_1 < model_2`` (string order); ``battles`` counts
        every battle of the pair in the category (ties included whatever ``ties`` is);
        ``predicted_win_rate_1 = 1 / (1 + base ** ((R_2 - R_1) / scale))`` from the
        Bradley-Terry ratings, null when either model is not on that board.
    """
    a_first = pl.col("model_a") <= pl.col("model_b")
    winner = pl.col("winner")
    won_1 = pl.when(a_first).then(winner == "model_a").otherwise(winner == "model_b")
    won_2 = pl.when(a_first).then(winner == "model_b").otherwise(winner == "model_a")
    table = (
        category_battles.with_columns(
            model_1=pl.when(a_first).then("model_a").otherwise("model_b"),
            model_2=pl.when(a_first).then("model_b").otherwise("model_a"),
        )
        .group_by("category", "model_1", "model_2")
        .agg(
            battles=pl.len().cast(pl.Int64),
            wins_1=won_1.sum().cast(pl.Int64),
            wins_2=won_2.sum().cast(pl.Int64),
            ties=(winner == "tie").sum().cast(pl.Int64),
            both_bad=(winner == "both_bad").sum().cast(pl.Int64),
        )
    )
    if ties == "half":
        rate = (pl.col("wins_1") + 0.5 * (pl.col("ties") + pl.col("both_bad"))) / pl.col(
            "battles"
        )
    else:
        decided = pl.col("wins_1") + pl.col("wins_2")
        rate = pl.when(decided > 0).then(pl.col("wins_1") / decided)
    ratings = bt_ratings.select("category", "model", "rating")
    table = (
        table.with_columns(win_rate_1=rate.cast(pl.Float64))
        .join(
            ratings.rename({"model": "model_1", "rating": "_r1"}),
            on=["category", "model_1"],
            how="left",
        )
        .join(
            ratings.rename({"model": "model_2", "rating": "_r2"}),
            on=["category", "model_2"],
            how="left",
        )
        .with_columns(
            predicted_win_rate_1=1.0 / (1.0 + base ** ((pl.col("_r2") - pl.col("_r1")) / scale))
        )
    )
    return table.select([pl.col(c).cast(t) for c, t in PAIRWISE_SCHEMA.items()])
