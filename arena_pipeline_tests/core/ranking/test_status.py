"""What the boards leave out: arena.unrated_models rows (record and reason) and arena.board_status."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from arena_pipeline.core.dataset.categories import CATEGORY_NAMES
from arena_pipeline.core.ranking import BOARD_STATUS_SCHEMA, UNRATED_MODELS_SCHEMA, RankingConfig, compute_rankings
from arena_pipeline.core.ranking.board import NOT_CONNECTED, ONLY_LOSSES, ONLY_WINS
from arena_pipeline.core.ranking.scale import rank_upper_bounds, ranks
from arena_pipeline.core.ranking.tags import tag_rows

FIXTURE = Path(__file__).parents[2] / "data" / "ranking" / "synthetic_battles.parquet"


def battles_with(rows: list[tuple[str, str, str]]) -> pl.DataFrame:
    base = pl.read_parquet(FIXTURE).select("id", "model_a", "model_b", "winner")
    extra = pl.DataFrame({"id": [f"x{i}" for i in range(len(rows))], "model_a": [r[0] for r in rows],
                          "model_b": [r[1] for r in rows], "winner": [r[2] for r in rows]})
    return pl.concat([base, extra])


def rank(battles: pl.DataFrame, **config):
    every = battles.select(pl.col("id").alias("battle_id"), pl.lit("overall").alias("category"))
    tags = tag_rows(battles.get_column("id"), [every])
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


def test_no_board_says_why(golden):
    battles = battles_with([])
    strict = rank(battles, min_battles=10_000)
    row = strict.board_status.row(0, named=True)
    assert (row["status"], row["reason"], row["rated_models"]) == ("no_board", "no model passes min_battles=10000", 0)
    assert strict.unrated_models.height == 6
    (reason,) = set(strict.unrated_models.get_column("reason"))
    golden.check("boards", "unrated: under min_battles", reason)
    hidden = rank(battles, display_min_battles=10_000).board_status.row(0, named=True)
    assert hidden["status"] == "no_board" and hidden["provisional_models"] == hidden["rated_models"] == 6
    golden.check("boards", "no board: every model provisional", hidden["reason"])


def test_no_board_names_what_left_each_model_out(golden):
    """One battle, won: the winner has only wins, and the loser then has no battle against a model
    kept; min_battles=1 is not the reason (both have a battle), so it is not named as such."""
    one = pl.DataFrame({"id": ["k1"], "model_a": ["gemma"], "model_b": ["claude"], "winner": ["model_a"]})
    row = rank(one).board_status.row(0, named=True)
    assert row["status"] == "no_board"
    golden.check("boards", "no board: fewer than 2 rated models", row["reason"])


def test_models_with_the_same_record_share_a_rank():
    """b and c have the same record against the same opponents (and tie each other): their ratings
    are equal up to the solver's rounding, and so are their ranks and rank upper bounds."""
    rows = [("b", "a", "model_a"), ("c", "a", "model_a"), ("a", "d", "model_a"), ("d", "b", "model_a"),
            ("d", "c", "model_a"), ("b", "c", "tie"), ("a", "d", "tie")] * 3
    battles = pl.DataFrame({"id": [f"s{i}" for i in range(len(rows))], "model_a": [r[0] for r in rows],
                            "model_b": [r[1] for r in rows], "winner": [r[2] for r in rows]})
    board = rank(battles, display_min_battles=0).leaderboard.sort("model")
    by_model = {r["model"]: r for r in board.iter_rows(named=True)}
    assert abs(by_model["b"]["rating"] - by_model["c"]["rating"]) < 1e-6
    assert by_model["b"]["rank"] == by_model["c"]["rank"] and by_model["b"]["rank_ub"] == by_model["c"]["rank_ub"]
    # ranks still count the models strictly above: 1 + the number of higher ratings
    ratings = board.get_column("rating").to_list()
    assert board.get_column("rank").to_list() == [1 + sum(o > r + 1e-6 for o in ratings) for r in ratings]


def test_ratings_equal_up_to_rounding_share_a_rank():
    """The 100-vote sample's coding board: three models with one record, whose ratings the solver
    returned 1e-13 apart, were ranked 3, 3, 5; they share rank 3, and intervals as close share rank_ub."""
    rating = np.array([950.0, 930.0, 921.1695465337773, 921.1695465337772, 921.1695465337770, 900.0])
    assert ranks(rating).tolist() == [1, 2, 3, 3, 3, 6]
    assert ranks(rating, shown=np.array([True, False, True, True, True, True])).tolist() == [1, 2, 2, 2, 2, 5]
    lower, upper = rating - 10, rating + 10
    lower[0] = upper[1] + 1e-12  # above the second model's interval by rounding only: not above it
    assert rank_upper_bounds(lower, upper).tolist() == [1, 1, 2, 2, 2, 6]


def test_every_category_rule_has_a_status(golden):
    out = rank(battles_with([]))
    status = out.board_status
    assert status.schema == pl.Schema(BOARD_STATUS_SCHEMA)
    assert status.get_column("category").to_list() == list(CATEGORY_NAMES)
    by_name = {r["category"]: r for r in status.iter_rows(named=True)}
    assert by_name["no_refusal"]["status"] == "unavailable"
    golden.check("boards", "unavailable: a field the dump lacks", by_name["no_refusal"]["reason"])
    # no_tie reads winner, which every dump has: available, but nothing was tagged here
    assert (by_name["no_tie"]["status"], by_name["no_tie"]["reason"]) == ("no_board", "no battles tagged")
    assert by_name["hard_prompt"]["reason"].endswith(" fields")
