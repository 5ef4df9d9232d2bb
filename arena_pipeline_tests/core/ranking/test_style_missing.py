"""bt_style on votes whose dump has no style counts: left out of the fit and counted, never a zero."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from arena_pipeline.core.ranking import RankingConfig, compute_rankings
from arena_pipeline.core.ranking.style_control import style_columns
from arena_pipeline.core.ranking.tags import tag_rows

FIXTURE = Path(__file__).parents[2] / "data" / "ranking" / "synthetic_battles.parquet"
SETTINGS = {"methods": ("bt", "bt_style"), "bootstrap_rounds": 0, "display_min_battles": 0}


def unstyled_votes(styled: pl.DataFrame, n: int, seed: int) -> pl.DataFrame:
    """``n`` votes as an older dump gives them: every style count null; one model seen only here.

    The first model wins every one of its votes here, so that, were these votes fitted with a
    style difference of 0, the ratings and coefficients would move.
    """
    rng = np.random.default_rng(seed)
    models = sorted(set(styled.get_column("model_a")) | set(styled.get_column("model_b")))
    old_only = "model-only-in-an-old-dump"
    pool = [*models, old_only]
    a = rng.choice(pool, n)
    b = rng.choice(pool, n)
    b = np.where(a == b, models[0], b)
    a = np.where(a == b, models[1], a)
    winner = np.where(a == models[0], "model_a", np.where(b == models[0], "model_b",
                      rng.choice(["model_a", "model_b", "tie"], n)))
    votes = pl.DataFrame({"id": [f"old-{i}" for i in range(n)], "model_a": a, "model_b": b, "winner": winner})
    # every other column of the fixture (the style counts among them) null, as the loader leaves it
    others = {c: pl.lit(None, t) for c, t in styled.schema.items() if c not in votes.columns}
    return votes.with_columns(**others).select([pl.col(c).cast(t) for c, t in styled.schema.items()])


def rank(frame: pl.DataFrame):
    every = frame.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    categories = tag_rows(frame.get_column("id"), [every])
    return compute_rankings(frame, categories, RankingConfig(**SETTINGS))


@pytest.fixture(scope="module")
def runs():
    styled = pl.read_parquet(FIXTURE)
    old = unstyled_votes(styled, 400, 7)
    mixed = pl.concat([styled, old])
    zeroed = mixed.with_columns(pl.col(c).fill_null(0) for c in style_columns())
    return {"styled": rank(styled), "mixed": rank(mixed), "zeroed": rank(zeroed), "old": old}


def board(output, method: str) -> dict[str, float]:
    lb = output.leaderboard.filter(pl.col("method") == method)
    return dict(zip(lb.get_column("model"), lb.get_column("rating"), strict=True))


def test_bt_style_on_a_mixed_dump_equals_bt_style_on_the_styled_votes_alone(runs):
    mixed, styled = runs["mixed"], runs["styled"]
    got, expected = board(mixed, "bt_style"), board(styled, "bt_style")
    assert set(got) == set(expected)  # the model seen only in unstyled votes has no bt_style rating
    assert max(abs(got[m] - expected[m]) for m in expected) < 1e-6
    both = mixed.leaderboard.filter(pl.col("method") == "bt_style").join(
        styled.leaderboard.filter(pl.col("method") == "bt_style"), on="model", suffix="_alone")
    assert (both["n_battles"] == both["n_battles_alone"]).all()
    assert np.allclose(both["ci_lower"].fill_null(0).to_numpy(), both["ci_lower_alone"].fill_null(0).to_numpy())
    coef = mixed.style_coefficients.join(styled.style_coefficients, on=["category", "feature"], suffix="_alone")
    assert np.allclose(coef["coefficient"].to_numpy(), coef["coefficient_alone"].to_numpy(), atol=1e-9)
    # ... while bt fits every vote, the old dump's included
    assert "model-only-in-an-old-dump" in board(mixed, "bt")


def test_left_out_votes_are_counted(runs):
    mixed, styled, old = runs["mixed"], runs["styled"], runs["old"]
    coef = mixed.style_coefficients
    assert coef.get_column("battles_without_style").unique().to_list() == [old.height]
    assert coef.get_column("battles_fitted").unique().to_list() == [pl.read_parquet(FIXTURE).height]
    assert styled.style_coefficients.get_column("battles_without_style").unique().to_list() == [0]
    assert mixed.metadata["style_left_out"] == {"overall": old.height}
    info = mixed.metadata["categories"]["overall"]["bt_style"]
    assert info["models_without_style_board"] == ["model-only-in-an-old-dump"]


def test_entering_them_as_zero_would_have_moved_the_board(runs):
    """The guard against the silent zero: the same votes with counts of 0 change the fit."""
    zeroed, styled = runs["zeroed"], runs["styled"]
    a, b = board(zeroed, "bt_style"), board(styled, "bt_style")
    assert max(abs(a[m] - b[m]) for m in b) > 1.0
    assert zeroed.style_coefficients.get_column("battles_without_style").unique().to_list() == [0]


def test_no_styled_vote_means_no_bt_style_board(runs):
    old = runs["old"]
    out = rank(old)
    assert out.leaderboard.get_column("method").unique().to_list() == ["bt"]
    assert out.style_coefficients.is_empty()
    info = out.metadata["categories"]["overall"]["bt_style"]
    assert "no bt_style board" in info["note"] and info["battles_with_style"] == 0
