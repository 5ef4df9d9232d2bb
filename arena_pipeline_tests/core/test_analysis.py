"""Analysis tables: position bias and monthly rating trends (golden cases + invariants)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from scipy.stats import binomtest

from arena_pipeline.core.analysis import (
    POSITION_BIAS_SCHEMA,
    RATING_TREND_SCHEMA,
    position_bias,
    position_bias_in_duckdb,
    rating_trend,
)
from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.tags import tag_rows


def _battles(winners: list[str], **columns) -> pl.DataFrame:
    n = len(winners)
    data = {
        "id": [f"b{i:03d}" for i in range(n)],
        "model_a": columns.pop("model_a", ["m1"] * n),
        "model_b": columns.pop("model_b", ["m2"] * n),
        "winner": winners,
        **columns,
    }
    return pl.DataFrame(data)


def _tags(battles: pl.DataFrame, category: str = "overall") -> pl.DataFrame:
    return battles.select(pl.col("id").alias("battle_id"), category=pl.lit(category))


# ---------------------------------------------------------------------------------------------
# position_bias
# ---------------------------------------------------------------------------------------------


def test_position_bias_golden_counts_match_scipy():
    winners = ["model_a"] * 7 + ["model_b"] * 3 + ["tie"] * 2 + ["both_bad"]
    battles = _battles(winners)
    out = position_bias(battles, _tags(battles))
    assert out.schema == pl.Schema(POSITION_BIAS_SCHEMA)
    row = out.row(0, named=True)
    assert row | {"a_win_rate": None, "ci_lower": None, "ci_upper": None, "p_value": None} == {
        "category": "overall", "battles": 13, "a_wins": 7, "b_wins": 3, "ties": 2, "both_bad": 1,
        "decisive": 10, "a_win_rate": None, "ci_lower": None, "ci_upper": None, "p_value": None,
    }
    test = binomtest(7, 10, 0.5)
    ci = test.proportion_ci(confidence_level=0.95, method="exact")
    assert row["a_win_rate"] == pytest.approx(0.7)
    assert row["p_value"] == pytest.approx(test.pvalue, rel=1e-9)
    assert (row["ci_lower"], row["ci_upper"]) == pytest.approx((ci.low, ci.high), rel=1e-9)


@pytest.mark.parametrize("k,n", [(0, 5), (5, 5), (50, 120), (61, 100), (1, 1)])
def test_position_bias_p_value_and_interval_match_scipy_at_edges(k, n):
    battles = _battles(["model_a"] * k + ["model_b"] * (n - k))
    row = position_bias(battles, _tags(battles), confidence=0.9).row(0, named=True)
    test = binomtest(k, n, 0.5)
    ci = test.proportion_ci(confidence_level=0.9, method="exact")
    assert row["p_value"] == pytest.approx(test.pvalue, rel=1e-9)
    assert row["ci_lower"] == pytest.approx(ci.low, abs=1e-12)
    assert row["ci_upper"] == pytest.approx(ci.high, abs=1e-12)


def test_position_bias_equals_the_closed_form_within_1e_12():
    """binomtest against the closed forms the function used before it (independent of scipy's
    binomtest code path): Clopper-Pearson from beta quantiles, the p-value as twice the smaller
    binomial tail (the two-sided test at p = 0.5 is symmetric), on every k for n <= 25 and a few
    large n up to the full dump's size."""
    from scipy.stats import beta, binom

    cases = [(k, n) for n in range(1, 26) for k in range(n + 1)]
    cases += [(k, n) for n in (997, 135_634) for k in (0, 1, n // 3, n // 2, n // 2 + 1, n - 1, n)]
    votes = (
        pl.DataFrame({"category": [str(i) for i in range(len(cases))],
                      "k": [k for k, _ in cases], "n": [n for _, n in cases]})
        .with_columns(j=pl.int_ranges(0, "n")).explode("j")
        .select(pl.format("{}-{}", "category", "j").alias("id"), "category",
                pl.when(pl.col("j") < pl.col("k")).then(pl.lit("model_a"))
                .otherwise(pl.lit("model_b")).alias("winner"))
    )
    battles, tags = votes.select("id", "winner"), votes.select(pl.col("id").alias("battle_id"), "category")
    out = position_bias(battles, tags, confidence=0.95).sort(pl.col("category").cast(pl.Int64))
    k = out["a_wins"].to_numpy().astype(float)
    n = out["decisive"].to_numpy().astype(float)
    assert list(zip(k.astype(int), n.astype(int), strict=True)) == cases
    lower = np.where(k > 0, beta.ppf(0.025, k, n - k + 1), 0.0)
    upper = np.where(k < n, beta.ppf(0.975, k + 1, n - k), 1.0)
    p_value = np.minimum(1.0, 2.0 * np.minimum(binom.cdf(k, n, 0.5), binom.sf(k - 1, n, 0.5)))
    np.testing.assert_allclose(out["ci_lower"].to_numpy(), lower, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["ci_upper"].to_numpy(), upper, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["p_value"].to_numpy(), p_value, rtol=0, atol=1e-12)


def test_position_bias_swapping_sides_mirrors_the_rate():
    rng = np.random.default_rng(3)
    winners = rng.choice(["model_a", "model_b", "tie", "both_bad"], 400, p=[0.45, 0.35, 0.15, 0.05]).tolist()
    battles = _battles(winners)
    swapped = battles.with_columns(
        winner=pl.col("winner").replace({"model_a": "model_b", "model_b": "model_a"})
    )
    a = position_bias(battles, _tags(battles)).row(0, named=True)
    b = position_bias(swapped, _tags(swapped)).row(0, named=True)
    assert (b["a_wins"], b["b_wins"], b["ties"], b["both_bad"]) == (a["b_wins"], a["a_wins"], a["ties"], a["both_bad"])
    assert b["a_win_rate"] == pytest.approx(1 - a["a_win_rate"])
    assert b["p_value"] == pytest.approx(a["p_value"])
    assert (b["ci_lower"], b["ci_upper"]) == pytest.approx((1 - a["ci_upper"], 1 - a["ci_lower"]))


def test_position_bias_per_category_order_nulls_and_bad_rows():
    battles = _battles(["model_a", "model_b", "tie", "both_bad", None, "weird"])
    tags = pl.DataFrame(
        {
            "battle_id": ["b000", "b001", "b002", "b003", "b004", "b005", "b002", "b003", "b000", "b000"],
            "category": ["math", "math", "coding", "coding", "math", "math", "overall", "overall",
                         "zz_custom", "math"],  # b000/math twice: counted once
        }
    )
    out = position_bias(battles, tags)
    assert out.get_column("category").to_list() == ["overall", "math", "coding", "zz_custom"]
    by = {r["category"]: r for r in out.iter_rows(named=True)}
    assert by["math"]["battles"] == 2 and by["math"]["a_win_rate"] == 0.5  # null/weird winners ignored
    assert by["coding"]["decisive"] == 0
    assert by["coding"]["a_win_rate"] is None and by["coding"]["p_value"] is None
    assert by["coding"]["ci_lower"] is None
    assert by["zz_custom"]["a_win_rate"] == 1.0


def test_position_bias_empty_input_has_the_schema():
    battles = _battles([])
    out = position_bias(battles.cast({"winner": pl.String, "model_a": pl.String, "model_b": pl.String}),
                        pl.DataFrame(schema={"battle_id": pl.String, "category": pl.String}))
    assert out.height == 0 and out.schema == pl.Schema(POSITION_BIAS_SCHEMA)


# ---------------------------------------------------------------------------------------------
# rating_trend
# ---------------------------------------------------------------------------------------------


def _month_battles(month: dt.datetime, strengths: dict[str, float], n: int, seed: int) -> pl.DataFrame:
    """Battles of one month among ``strengths``' models, Bradley-Terry outcomes, no ties."""
    rng = np.random.default_rng(seed)
    names = list(strengths)
    s = np.array([strengths[m] for m in names])
    a = rng.integers(0, len(names), n)
    b = (a + rng.integers(1, len(names), n)) % len(names)
    a_wins = rng.random(n) < 1 / (1 + np.exp(-(s[a] - s[b])))
    return pl.DataFrame(
        {
            "id": [f"{month:%Y%m}-{i:04d}" for i in range(n)],
            "model_a": [names[i] for i in a],
            "model_b": [names[i] for i in b],
            "winner": np.where(a_wins, "model_a", "model_b").tolist(),
            "timestamp": [month + dt.timedelta(hours=int(h)) for h in rng.integers(0, 24 * 27, n)],
        }
    ).with_columns(pl.col("timestamp").cast(pl.Datetime("us")))


def test_rating_trend_follows_a_change_of_strength_between_months():
    april = _month_battles(dt.datetime(2025, 4, 1), {"x": 1.0, "y": 0.0, "z": -1.0}, 900, 1)
    may = _month_battles(dt.datetime(2025, 5, 1), {"x": -1.0, "y": 0.0, "z": 1.0}, 900, 2)
    battles = pl.concat([april, may])
    out = rating_trend(battles, _tags(battles), RankingConfig(min_battles=10, bootstrap_rounds=0))
    assert out.schema == pl.Schema(RATING_TREND_SCHEMA)
    assert out.get_column("month").unique().sort().to_list() == [dt.date(2025, 4, 1), dt.date(2025, 5, 1)]
    top = out.filter(pl.col("rank") == 1).sort("month").get_column("model").to_list()
    assert top == ["x", "z"]
    # each month is the board compute_rankings gives on that month alone, shifted by one constant
    # (the chain across months: rating_trend's Notes)
    expected = compute_rankings(
        may, tag_rows(may.get_column("id"), [_tags(may)]),
        RankingConfig(methods=("bt",), min_battles=10, bootstrap_rounds=0)
    ).leaderboard
    got = out.filter(pl.col("month") == dt.date(2025, 5, 1)).sort("model")
    expected = expected.sort("model")
    shift = got["rating"] - expected["rating"]
    assert shift.to_list() == pytest.approx([shift[0]] * 3)
    assert got.get_column("n_battles").to_list() == expected.get_column("n_battles").to_list()
    assert (got["ci_lower"] - expected["ci_lower"]).to_list() == pytest.approx(shift.to_list())
    unchained = rating_trend(battles, _tags(battles), RankingConfig(min_battles=10, bootstrap_rounds=0), chain=False)
    assert unchained.filter(pl.col("month") == dt.date(2025, 5, 1)).sort("model")["rating"].to_list() == \
        pytest.approx(expected["rating"].to_list())
    # the intervals bracket the ratings
    assert (out.get_column("ci_lower") <= out.get_column("rating")).all()
    assert (out.get_column("rating") <= out.get_column("ci_upper")).all()


def test_rating_trend_min_battles_is_per_month_and_null_timestamps_are_left_out():
    april = _month_battles(dt.datetime(2025, 4, 1), {"x": 0.5, "y": 0.0, "z": -0.5}, 600, 3)
    # "w" plays only 5 battles in May
    may = _month_battles(dt.datetime(2025, 5, 1), {"x": 0.5, "y": 0.0, "z": -0.5}, 600, 4)
    extra = pl.DataFrame(
        {
            "id": [f"w{i}" for i in range(5)],
            "model_a": ["w"] * 5,
            "model_b": ["x", "y", "z", "x", "y"],
            "winner": ["model_a", "model_b", "model_a", "model_b", "model_a"],
            "timestamp": [dt.datetime(2025, 5, 3)] * 5,
        }
    ).with_columns(pl.col("timestamp").cast(pl.Datetime("us")))
    undated = april.head(50).with_columns(
        id=pl.lit("u-") + pl.col("id"), timestamp=pl.lit(None, pl.Datetime("us"))
    )
    battles = pl.concat([april, may, extra, undated])
    out = rating_trend(battles, _tags(battles), RankingConfig(min_battles=20, bootstrap_rounds=0))
    assert "w" not in out.get_column("model").to_list()
    counts = out.group_by("month").agg(pl.col("n_battles").sum() // 2).sort("month")
    assert counts.get_column("n_battles").to_list() == [600, 600]  # undated battles not counted


def test_rating_trend_categories_selection_and_default_overall_only():
    battles = _month_battles(dt.datetime(2025, 6, 1), {"x": 0.5, "y": 0.0, "z": -0.5}, 600, 5)
    tags = pl.concat([_tags(battles), _tags(battles.head(300), "coding")])
    only_overall = rating_trend(battles, tags, RankingConfig(min_battles=10, bootstrap_rounds=0))
    assert only_overall.get_column("category").unique().to_list() == ["overall"]
    every = rating_trend(battles, tags, RankingConfig(min_battles=10, bootstrap_rounds=0), categories=None)
    assert every.get_column("category").unique(maintain_order=True).to_list() == ["overall", "coding"]
    assert rating_trend(battles, tags, categories=("math",)).height == 0


def test_rating_trend_default_config_is_bt_only_with_50_battles():
    battles = _month_battles(dt.datetime(2025, 6, 1), {"x": 0.5, "y": 0.0}, 80, 6)
    out = rating_trend(battles, _tags(battles))
    assert out.height == 2 and out.get_column("n_battles").min() >= 50


def test_position_bias_on_the_real_sample_counts_every_battle():
    from pathlib import Path

    from arena_pipeline.core.dataset.categories import tag_categories
    from arena_pipeline.core.ingest.sources import read_csv_export
    from arena_pipeline_dev.fixtures import flatten_table

    sample = Path(__file__).parents[1] / "data" / "arena_human_preference_sample_100.csv"
    shard = flatten_table(read_csv_export(sample).table, sample.name)
    tags, _ = tag_categories(shard.battles)
    bias = position_bias(shard.battles, tags)
    assert bias.filter(pl.col("category") == "overall").get_column("battles").item() == shard.battles.height


def _real_sample() -> tuple[pl.DataFrame, pl.DataFrame]:
    from pathlib import Path

    from arena_pipeline.core.dataset.categories import tag_categories
    from arena_pipeline.core.ingest.sources import read_csv_export
    from arena_pipeline_dev.fixtures import flatten_table

    sample = Path(__file__).parents[1] / "data" / "arena_human_preference_sample_100.csv"
    shard = flatten_table(read_csv_export(sample).table, sample.name)
    return shard.battles, tag_categories(shard.battles)[0]


def _bad_rows() -> tuple[pl.DataFrame, pl.DataFrame]:
    battles = _battles(["model_a", "model_b", "tie", "both_bad", None, "weird", "model_a"])
    battles = battles.with_columns(id=pl.Series(["b000", "b001", "b002", "b003", "b004", "b005", None]))
    tags = pl.DataFrame({"battle_id": ["b000", "b001", "b002", "b003", "b004", "b005", "b002", "b000", None],
                         "category": ["math", "math", "coding", "coding", "math", "math", "overall", "math",
                                      "overall"]})
    return battles, tags


@pytest.mark.parametrize("made", [_bad_rows, _real_sample, lambda: (
    _battles([]).cast({"winner": pl.String, "model_a": pl.String, "model_b": pl.String}),
    pl.DataFrame(schema={"battle_id": pl.String, "category": pl.String}))], ids=["bad_rows", "real", "empty"])
def test_position_bias_counted_in_duckdb_equals_the_frames(made):
    import duckdb

    battles, tags = made()
    with duckdb.connect() as con:
        con.register("battles", battles.to_arrow())
        con.register("tags", tags.to_arrow())
        counted = position_bias_in_duckdb(con, '"battles"', '"tags"')
    expected = position_bias(battles, tags)
    assert expected.height > 0 or made is not _real_sample
    assert counted.equals(expected), (counted, expected)


def _drift_battles(months: int = 8, per_month: int = 40_000) -> tuple[pl.DataFrame, float]:
    """Synthetic months with a known drift: four stable models, one ('drifter') gaining
    ``step`` logits a month, and a strong newcomer each month (for two months) that raises the field."""
    step = 0.15
    parts = []
    for m in range(months):
        strengths = {"s1": 0.6, "s2": 0.2, "s3": -0.2, "s4": -0.6, "drifter": step * m,
                     f"new{m}": 1.0 + 0.25 * m}
        if m > 0:
            strengths[f"new{m - 1}"] = 1.0 + 0.25 * (m - 1)
        start = dt.datetime(2023 + (4 + m) // 12, (4 + m) % 12 + 1, 1)
        parts.append(_month_battles(start, strengths, per_month, 100 + m))
    return pl.concat(parts), step


def _slope(frame: pl.DataFrame, model: str) -> float:
    rows = frame.filter(pl.col("model") == model).sort("month")
    x = np.arange(rows.height, dtype=float)
    return float(np.polyfit(x, rows.get_column("rating").to_numpy(), 1)[0])


def test_rating_trend_chains_months_and_recovers_a_known_drift():
    battles, step = _drift_battles()
    config = RankingConfig(min_battles=50, bootstrap_rounds=0, anchor_models=())
    out = rating_trend(battles, _tags(battles), config)
    scale = 400 / np.log(10)  # rating points per logit
    # the drifter's month-to-month gain is recovered (stated tolerance: 20%)
    assert _slope(out, "drifter") == pytest.approx(step * scale, rel=0.20)
    # models whose strength never changes stay flat (|slope| under 4 points a month, 15% of the drift)
    for model in ("s1", "s2", "s3", "s4"):
        assert abs(_slope(out, model)) < 4, model
    # the stable models' gaps are the true ones in every month (2 x 0.4 logits between s1 and s3)
    gaps = out.pivot(on="model", index="month", values="rating").select(pl.col("s1") - pl.col("s3"))
    assert gaps.to_series().to_list() == pytest.approx([0.8 * scale] * 8, abs=25)
    months = out.select("month", "linked_models").unique().sort("month")
    assert months["linked_models"].to_list() == [None] + [6] * 7  # 4 stable, drifter, last newcomer
    # without the chain every month is centred on its own field: as stronger newcomers arrive
    # the stable models appear to decline, which is what chaining removes
    centred = rating_trend(battles, _tags(battles), config, chain=False)
    assert _slope(centred, "s1") < -10
    assert centred["linked_models"].null_count() == centred.height


def test_rating_trend_chain_restarts_when_months_share_no_model():
    april = _month_battles(dt.datetime(2025, 4, 1), {"x": 1.0, "y": 0.0}, 600, 7)
    may = _month_battles(dt.datetime(2025, 5, 1), {"u": 1.0, "v": 0.0}, 600, 8)
    battles = pl.concat([april, may])
    out = rating_trend(battles, _tags(battles), RankingConfig(min_battles=10, bootstrap_rounds=0))
    by_month = out.group_by("month").agg(pl.col("rating").mean(), pl.col("linked_models").first()).sort("month")
    assert by_month["linked_models"].to_list() == [None, 0]
    assert by_month["rating"].to_list() == pytest.approx([1000.0, 1000.0])  # both centred
