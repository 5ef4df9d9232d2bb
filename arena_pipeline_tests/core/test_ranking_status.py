"""What the boards leave out: arena.unrated_models rows (record and reason) and arena.board_status."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from arena_pipeline.core.categories import CATEGORY_NAMES
from arena_pipeline.core.ranking import BOARD_STATUS_SCHEMA, UNRATED_MODELS_SCHEMA, RankingConfig, compute_rankings
from arena_pipeline.core.ranking.board import NOT_CONNECTED, ONLY_LOSSES, ONLY_WINS

FIXTURE = Path(__file__).parents[1] / "data" / "ranking" / "synthetic_battles.parquet"


def battles_with(rows: list[tuple[str, str, str]]) -> pl.DataFrame:
    base = pl.read_parquet(FIXTURE).select("id", "model_a", "model_b", "winner")
    extra = pl.DataFrame({"id": [f"x{i}" for i in range(len(rows))], "model_a": [r[0] for r in rows],
                          "model_b": [r[1] for r in rows], "winner": [r[2] for r in rows]})
    return pl.concat([base, extra])


def rank(battles: pl.DataFrame, **config):
    tags = battles.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    settings = {"methods": ("bt",), "bootstrap_rounds": 0, **config}
    return compute_rankings(battles, tags, RankingConfig(**settings))


def test_each_unrated_model_has_its_record_and_reason():
    rows = ([("champ", "model-a", "model_a")] * 7 + [("model-b", "loser", "model_a")] * 5
            + [("loser", "model-c", "model_b")] * 4 + [("x1", "x2", "model_a"), ("x2", "x1", "model_a"),
                                                     ("x1", "x2", "tie")])
    out = rank(battles_with(rows))
    unrated = out.unrated_models
    assert unrated.schema == pl.Schema(UNRATED_MODELS_SCHEMA)
    got = {r["model"]: (r["battles"], r["wins"], r["losses"], r["ties"], r["reason"])
           for r in unrated.iter_rows(named=True)}
    assert got == {"champ": (7, 7, 0, 0, ONLY_WINS), "loser": (9, 0, 9, 0, ONLY_LOSSES),
                   "x1": (3, 1, 1, 1, NOT_CONNECTED), "x2": (3, 1, 1, 1, NOT_CONNECTED)}
    assert set(unrated.get_column("model")).isdisjoint(out.leaderboard.get_column("model"))
    status = out.board_status.row(0, named=True)
    assert status["category"] == "overall" and status["status"] == "board" and status["unrated_models"] == 4
    assert status["battles"] == 1200 + len(rows)
    assert status["rated_models"] == status["shown_models"] + status["provisional_models"] == 6


def test_no_board_says_why():
    battles = battles_with([])
    strict = rank(battles, min_battles=10_000)
    row = strict.board_status.row(0, named=True)
    assert (row["status"], row["reason"], row["rated_models"]) == ("no_board", "no model passes min_battles=10000", 0)
    assert strict.unrated_models.height == 6
    assert set(strict.unrated_models.get_column("reason")) == {
        "fewer than min_battles=10000 battles against the models kept"}
    hidden = rank(battles, display_min_battles=10_000).board_status.row(0, named=True)
    assert hidden["status"] == "no_board" and hidden["provisional_models"] == hidden["rated_models"] == 6
    assert hidden["reason"] == "no model has display_min_battles=10000 battles or more; 6 provisional models"


def test_every_category_rule_has_a_status():
    out = rank(battles_with([]))
    status = out.board_status
    assert status.schema == pl.Schema(BOARD_STATUS_SCHEMA)
    assert status.get_column("category").to_list() == list(CATEGORY_NAMES)
    by_name = {r["category"]: r for r in status.iter_rows(named=True)}
    assert by_name["no_refusal"]["status"] == "unavailable"
    assert by_name["no_refusal"]["reason"] == "unavailable: the dump has no is_refusal field"
    # no_tie reads winner, which every dump has: available, but nothing was tagged here
    assert (by_name["no_tie"]["status"], by_name["no_tie"]["reason"]) == ("no_board", "no battles tagged")
    assert by_name["hard_prompt"]["reason"].endswith(" fields")
