"""The gate's board rules: empty overall board, lost models, lost categories, and the explicit override."""

from __future__ import annotations

import polars as pl
import pytest

from arena_pipeline.core.publication_gate import GatePolicy, board_problems, refusal_message


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


def test_allow_degenerate_lifts_every_rule():
    assert board_problems(_board([]), LIVE, GatePolicy(allow_degenerate=True)) == []


def test_shares_are_validated():
    with pytest.raises(ValueError, match="max_model_drop"):
        GatePolicy(max_model_drop=1.5)
