"""The read API: a model's profile, style means, unrated models and board status, against references
computed here from the battles and the ranking frames."""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.dataset.categories import CATEGORY_NAMES
from arena_pipeline.core.readside.derived import live_benchmarks
from arena_pipeline.presentation.read import PublicationView, read_published
from arena_pipeline_tests.support.synthetic_published import (
    CHAMPION,
    synthetic_battles,
    synthetic_benchmarks,
    synthetic_published,
    with_champion,
)

MODEL = "gpt-4.1-2025-04-14"


@pytest.fixture(scope="module")
def pub() -> PublicationView:
    return synthetic_published()


def test_profile_ratings_are_the_models_primary_rows_in_board_order(pub):
    ratings = pub.profile(MODEL)["ratings"]
    assert ratings.get_column("category").to_list() == ["overall", "math", "coding"]
    assert ratings.get_column("method").unique().to_list() == ["bt"]
    for r in ratings.iter_rows(named=True):
        row = pub.leaderboard.filter((pl.col("category") == r["category"]) & (pl.col("method") == "bt")
                                     & (pl.col("model") == MODEL)).row(0, named=True)
        assert (r["rating"], r["ci_lower"], r["ci_upper"]) == (row["rating"], row["ci_lower"], row["ci_upper"])


def test_profile_opponents_are_the_models_side_of_every_pair(pub):
    opponents = pub.profile(MODEL)["opponents"]
    battles = with_champion(synthetic_battles())
    mine = battles.filter((pl.col("model_a") == MODEL) | (pl.col("model_b") == MODEL)).with_columns(
        opponent=pl.when(pl.col("model_a") == MODEL).then("model_b").otherwise("model_a"),
        won=((pl.col("model_a") == MODEL) & (pl.col("winner") == "model_a"))
        | ((pl.col("model_b") == MODEL) & (pl.col("winner") == "model_b")),
        lost=((pl.col("model_a") == MODEL) & (pl.col("winner") == "model_b"))
        | ((pl.col("model_b") == MODEL) & (pl.col("winner") == "model_a")),
    )
    expected = mine.group_by("opponent").agg(battles=pl.len(), wins=pl.col("won").sum(),
                                             losses=pl.col("lost").sum())
    got = opponents.select("opponent", "battles", "wins", "losses").sort("opponent")
    assert got.equals(expected.sort("opponent").cast({"battles": pl.Int64, "wins": pl.Int64,
                                                      "losses": pl.Int64}))
    assert CHAMPION in got.get_column("opponent").to_list()  # an unrated opponent still met
    assert opponents.get_column("battles").is_sorted(descending=True)
    check = opponents.with_columns(
        rate=(pl.col("wins") + pl.col("ties") / 2) / pl.col("battles"))
    assert (check.get_column("rate") - check.get_column("win_rate")).abs().max() < 1e-12


def test_style_profile_means_per_answer_and_field_mean(pub):
    battles = with_champion(synthetic_battles())
    sides = pl.concat([battles.select(model="model_a", tokens="sum_assistant_a_tokens"),
                       battles.select(model="model_b", tokens="sum_assistant_b_tokens")])
    mean = sides.filter(pl.col("model") == MODEL).get_column("tokens").mean()
    style = pub.profile(MODEL)["style"]
    tokens = style.filter(pl.col("feature") == "tokens").row(0, named=True)
    assert tokens["model"] == pytest.approx(mean, rel=1e-12)
    assert tokens["field"] == pytest.approx(sides.get_column("tokens").mean(), rel=1e-12)
    assert style.get_column("feature").to_list() == ["tokens", "headers", "lists", "bold"]
    assert PublicationView(pub.leaderboard).profile(MODEL)["style"].height == 0  # no battles table


def test_unrated_and_board_status_follow_the_category_rules(pub):
    unrated = pub.unrated()
    assert unrated.select("category", "model", "battles", "wins", "losses", "ties").rows() == [
        ("overall", CHAMPION, 24, 24, 0, 0)]
    status = pub.board_status
    assert status.get_column("category").to_list() == list(CATEGORY_NAMES)
    overall = status.row(0, named=True)
    assert overall["status"] == "board" and overall["reason"] is None
    assert (overall["rated_models"], overall["shown_models"], overall["unrated_models"]) == (9, 9, 1)
    assert overall["battles"] == 3024
    assert pub.no_board().get_column("category").to_list() == [c for c in CATEGORY_NAMES if c != "overall"]
    assert pub.models()[0] == "gemini-2.5-pro" and CHAMPION not in pub.models()


def _warehouse_with_benchmarks(published: tuple[str, ...] = ("benchmark_scores", "benchmark_agreement"),
                               settings: dict | None = None, empty: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse: the synthetic leaderboard and benchmark tables, and publications 1..3, the
    live one (3) publishing the tables ``published`` with ``settings`` (its ``settings.tables``)."""
    bench = synthetic_benchmarks()
    leaderboard = synthetic_published().leaderboard  # noqa: F841 - read by DuckDB
    scores = bench.scores.clear() if empty else bench.scores  # noqa: F841
    agreement = bench.agreement.clear() if empty else bench.agreement  # noqa: F841
    tables = json.dumps(dict.fromkeys(published, "v"))
    con = duckdb.connect()
    con.execute("CREATE SCHEMA arena; CREATE TABLE arena.leaderboard AS SELECT * FROM leaderboard; "
                "CREATE TABLE arena.benchmark_scores AS SELECT * FROM scores; "
                "CREATE TABLE arena.benchmark_agreement AS SELECT * FROM agreement; "
                "CREATE TABLE arena.publications AS SELECT range + 1 AS publication_id, 'r' AS revision, "
                "CASE WHEN range = 2 THEN ? ELSE '{}' END AS tables, CASE WHEN range = 2 THEN ? ELSE '{}' END "
                "AS settings FROM range(3)", [tables, json.dumps({"tables": settings or {}})])
    return con


def test_benchmarks_are_read_only_when_the_live_publication_published_them():
    with _warehouse_with_benchmarks() as con:
        pub = read_published(con, style=False)
    assert pub.benchmarks is not None and pub.benchmarks.publication_id == 3 and pub.benchmarks.problem is None
    expected = synthetic_benchmarks().agreement
    assert pub.benchmark_agreement().equals(expected)
    overall = pub.benchmark_agreement("overall", "bt")
    assert overall.get_column("benchmark").to_list() == ["reasoning", "tiny"]
    # the points: the matched models' own leaderboard rows beside the scores, read independently here
    points = pub.benchmark_points("overall", "bt", "reasoning")
    scores = synthetic_benchmarks().scores.filter(pl.col("benchmark") == "reasoning")
    board = pub.board("overall", "bt").join(scores, left_on="model", right_on="canonical")
    assert points.height == board.height == 9  # the unknown model is not a point
    got = points.sort("model").select("model", "rating", "ci_lower", "ci_upper", "score")
    assert got.equals(board.sort("model").select("model", "rating", "ci_lower", "ci_upper", "score"))
    assert points.get_column("our_rank").to_list() == list(range(1, 10))  # by our rating
    assert pub.benchmarks.matched_models() == 9 and pub.benchmarks.names() == ["reasoning", "tiny"]
    # 9 + 3 matched rows (the odd name normalizes to another spelling, so "through the alias table")
    assert dict(pub.benchmarks.reasons().rows()) == {"matched by name": 11, "matched through the alias table": 1,
                                                     "not on our published leaderboard": 1}
    assert pub.benchmark_points("overall", "bt", "none").height == 0

    # a live publication from before the gate published them (stamped tables of an older one), or
    # publishing one of the two: no panel, never stale figures
    for published in ((), ("benchmark_scores",)):
        with _warehouse_with_benchmarks(published) as con:
            assert live_benchmarks(con) is None
            assert read_published(con, style=False).benchmarks is None
    with _warehouse_with_benchmarks(empty=True) as con:  # no benchmark file configured: empty versions
        assert live_benchmarks(con) is None
    # the file failed its check when the publication was built: the problem, and no figures
    failed = {"benchmark_scores": {"benchmarks": {"location": "bad.csv", "problem": "bad.csv: line 3: bad"}}}
    with _warehouse_with_benchmarks(settings=failed, empty=True) as con:
        bench = read_published(con, style=False).benchmarks
    assert bench is not None and bench.problem == "bad.csv: line 3: bad" and bench.scores.is_empty()
    with duckdb.connect() as con:  # no publication at all
        con.execute("CREATE SCHEMA arena")
        assert live_benchmarks(con) is None
    assert PublicationView(pub.leaderboard).benchmark_agreement().height == 0
