"""The gate's board rules: empty overall board, lost models, lost categories, and the explicit override."""

from __future__ import annotations

import polars as pl
import pytest

from arena_pipeline.core.publication.gate import GatePolicy, board_problems, refusal_message


def _board(models, categories=("overall",), method="bt", provisional=None) -> pl.DataFrame:
    rows = [{"category": c, "method": method, "model": m} for c in categories for m in models]
    frame = pl.DataFrame(rows, schema={"category": pl.String, "method": pl.String, "model": pl.String})
    if provisional is not None:
        frame = frame.with_columns(provisional=pl.col("model").is_in(provisional))
    return frame


LIVE = _board([f"m{i}" for i in range(10)], categories=("overall", "math", "coding", "creative_writing"))


def test_a_healthy_board_passes():
    assert board_problems(LIVE, None, GatePolicy()) == []
    assert board_problems(_board([f"m{i}" for i in range(9)], ("overall", "math", "coding")), LIVE, GatePolicy()) == []


def test_empty_overall_board_is_refused_with_the_setting_to_relax():
    empty = _board([])
    problem = board_problems(empty, None, GatePolicy())[0]
    assert "overall leaderboard is empty" in problem and "min_battles" in problem
    message = refusal_message([problem])
    assert message.startswith("publication refused, nothing changed") and message.count("allow_degenerate") == 1
    assert any("empty" in p for p in board_problems(empty, LIVE, GatePolicy()))
    # a board whose overall models are all provisional is not empty: they are rated, shown apart
    assert board_problems(_board(["a", "b"], provisional=["a", "b"]), None, GatePolicy()) == []


def test_model_and_category_losses_beyond_the_shares_are_refused():
    few = _board(["m0", "m1", "m2"], categories=("overall",))
    problems = board_problems(few, LIVE, GatePolicy())
    assert any("7 of the 10 models" in p and "70%" in p for p in problems)
    assert any("3 of the 4 live categories" in p and "coding" in p for p in problems)
    assert board_problems(few, LIVE, GatePolicy(max_model_drop=0.8, max_category_drop=0.8)) == []


def test_a_board_that_hides_the_live_models_as_provisional_is_refused(golden):
    """A re-run with a higher display threshold than the live run's keeps every model rated but
    shows none: users would see empty boards, so it counts as losing them (and says why)."""
    hidden = _board([f"m{i}" for i in range(10)], ("overall", "math", "coding", "creative_writing"),
                    provisional=[f"m{i}" for i in range(10)])
    problems = board_problems(hidden, LIVE, GatePolicy())
    assert len(problems) == 2
    golden.check("refusals", "models hidden as provisional: the models", problems[0])
    golden.check("refusals", "models hidden as provisional: the categories", problems[1])
    # a share within the setting passes: 4 of 10 overall models provisional now, every category still shows one
    some = hidden.with_columns(provisional=pl.col("model").is_in(["m0", "m1", "m2", "m3"]))
    assert board_problems(some, LIVE, GatePolicy()) == []
    # models without a rating and models now provisional add up
    mixed = _board([f"m{i}" for i in range(3, 10)], ("overall", "math", "coding", "creative_writing"),
                   provisional=["m3", "m4", "m5"])
    problems = board_problems(mixed, LIVE, GatePolicy())
    assert len(problems) == 1 and "6 of the 10 models" in problems[0] and "3 of them only provisional" in problems[0]


def test_a_live_board_without_shown_models_does_not_hold_the_next_one_back():
    """The first board of a small dump may be all provisional; the next all-provisional board, and a
    live board from before the display threshold (no ``provisional`` column: every model shown), compare fairly."""
    small = _board(["a", "b", "c"], ("overall", "math"), provisional=["a", "b", "c"])
    assert board_problems(small, small, GatePolicy()) == []
    assert board_problems(LIVE.with_columns(provisional=False), LIVE, GatePolicy()) == []
    assert len(board_problems(LIVE.with_columns(provisional=True), LIVE, GatePolicy())) == 2


def test_allow_degenerate_lifts_every_rule():
    assert board_problems(_board([]), LIVE, GatePolicy(allow_degenerate=True)) == []


def test_shares_are_validated():
    with pytest.raises(ValueError, match="max_model_drop"):
        GatePolicy(max_model_drop=1.5)


def _rated_board(ratings: dict[str, float], lower: float | None = 990.0, upper: float | None = 1010.0) -> pl.DataFrame:
    frame = _board(list(ratings), ("overall", "math"))
    return frame.with_columns(rating=pl.col("model").replace_strict(ratings, return_dtype=pl.Float64),
                              ci_lower=pl.lit(lower, pl.Float64), ci_upper=pl.lit(upper, pl.Float64),
                              cluster_sandwich_lower=pl.lit(float("-inf")), cluster_sandwich_upper=pl.lit(float("inf")))


@pytest.mark.parametrize(("change", "shown"), [
    ({"rating": float("inf")}, "rating=inf"),
    ({"rating": float("nan")}, "rating=nan"),
    ({"ci_lower": float("inf")}, "ci_lower=inf"),
    ({"ci_upper": float("-inf")}, "ci_upper=-inf"),
    ({"cluster_sandwich_upper": float("nan")}, "cluster_sandwich_upper=nan"),
])
def test_a_non_finite_rating_or_bound_is_refused_whatever_the_policy(change, shown, golden):
    """An alignment shift that overflowed published inf ratings: the gate let them through (issue 38, 4)."""
    healthy = _rated_board({"a": 1000.0, "b": 1010.0})
    # an unbounded clustered interval (a model seen in one session) is what its infinite bounds mean
    assert board_problems(healthy, LIVE, GatePolicy(max_model_drop=1, max_category_drop=1)) == []
    broken = healthy.with_columns(**{c: pl.when(pl.col("model") == "b").then(pl.lit(v)).otherwise(c)
                                     for c, v in change.items()})
    for policy in (GatePolicy(max_model_drop=1, max_category_drop=1), GatePolicy(allow_degenerate=True)):
        problems = board_problems(broken, LIVE, policy)
        assert len(problems) == 1
        assert shown in problems[0] and "overall/bt 'b'" in problems[0] and "math/bt 'b'" in problems[0]
    golden.check("refusals", f"a board that is not finite: {shown}", refusal_message(problems))
