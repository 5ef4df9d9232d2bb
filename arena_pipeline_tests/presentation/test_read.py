"""The read API: a model's profile, style means, unrated models and board status, against references
computed here from the battles and the ranking frames."""

from __future__ import annotations

import polars as pl
import pytest

from arena_pipeline.core.categories import CATEGORY_NAMES
from arena_pipeline.presentation.read import Published
from arena_pipeline_tests.presentation.synthetic import (
    CHAMPION,
    synthetic_battles,
    synthetic_published,
    with_champion,
)

MODEL = "gpt-4.1-2025-04-14"


@pytest.fixture(scope="module")
def pub() -> Published:
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
    assert Published(pub.leaderboard).profile(MODEL)["style"].height == 0  # no battles table


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
