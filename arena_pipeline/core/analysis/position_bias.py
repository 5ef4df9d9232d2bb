"""Position bias per category: how often the model shown first (A) wins, with an exact binomial test."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
from scipy.stats import binomtest

from arena_pipeline.core.dataset.categories import category_order

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

#: The outcomes counted (a winner not among them is ignored), and the column counting each.
OUTCOMES: dict[str, str] = {"model_a": "a_wins", "model_b": "b_wins", "tie": "ties", "both_bad": "both_bad"}


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
    winner = pl.col("winner")
    counts = (
        battle_categories.select(pl.col("battle_id", "category").cast(pl.String))
        .unique()
        .join(
            battles.select(pl.col("id").cast(pl.String).alias("battle_id"), "winner").filter(
                winner.is_in(list(OUTCOMES)).fill_null(False)
            ),
            on="battle_id",
            how="inner",
        )
        .group_by("category")
        .agg(
            battles=pl.len().cast(pl.Int64),
            **{column: (winner == outcome).sum().cast(pl.Int64) for outcome, column in OUTCOMES.items()},
        )
    )
    return position_bias_from_counts(counts, confidence)


def position_bias_in_duckdb(
    con: duckdb.DuckDBPyConnection, battles: str, battle_categories: str, confidence: float = 0.95
) -> pl.DataFrame:
    """:func:`position_bias` over the relations ``battles`` and ``battle_categories`` (quoted names on
    ``con``), counted inside DuckDB: it scans their columns and aggregates, spilling under its
    ``memory_limit``, so the memory held does not grow with the votes; one row per category reaches
    Python."""
    outcomes = ", ".join(f"'{outcome}'" for outcome in OUTCOMES)
    counted = ", ".join(f"count_if(winner = '{outcome}') AS {column}" for outcome, column in OUTCOMES.items())
    counts = con.sql(
        f"""SELECT category, count(*) AS battles, {counted}
        FROM (SELECT DISTINCT CAST(battle_id AS VARCHAR) AS battle_id, CAST(category AS VARCHAR) AS category
              FROM {battle_categories})
        JOIN (SELECT CAST(id AS VARCHAR) AS battle_id, winner FROM {battles} WHERE winner IN ({outcomes}))
        USING (battle_id)
        GROUP BY category"""
    ).pl()
    return position_bias_from_counts(counts, confidence)


def position_bias_from_counts(counts: pl.DataFrame, confidence: float = 0.95) -> pl.DataFrame:
    """:func:`position_bias` from its counts per category (``category``, ``battles``, ``a_wins``,
    ``b_wins``, ``ties``, ``both_bad``): the exact interval and test per category, in board order."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    counts = (
        counts.with_columns(pl.col("category").cast(pl.String),
                            pl.col("battles", *OUTCOMES.values()).cast(pl.Int64))
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
