"""core/readside/derived.py on hand-made tables with known answers: each pair from both sides, input
outcomes, style means per answer, the quality summary and the live publication's benchmarks."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.ranking import PAIRWISE_SCHEMA
from arena_pipeline.core.readside.derived import (
    LOADED_ROWS_SCHEMA,
    QUALITY_SUMMARY_SCHEMA,
    STYLE_PROFILE_SCHEMA,
    live_benchmarks,
    loaded_rows,
    opponents,
    quality_summary,
    style_profile,
    table_frame,
)


def test_opponents_gives_each_pair_from_both_sides():
    pairwise = pl.DataFrame([("overall", "a", "b", 10, 6, 2, 1, 1, 0.7, 0.65),
                             ("overall", "a", "c", 4, 1, 3, 0, 0, 0.25, 0.3)], schema=PAIRWISE_SCHEMA, orient="row")
    out = opponents(pairwise)
    assert out.columns == ["category", "model", "opponent", "battles", "wins", "losses", "ties", "win_rate",
                           "predicted"]
    rows = {(r["model"], r["opponent"]): r for r in out.iter_rows(named=True)}
    assert len(rows) == 4 and out.get_column("battles").to_list() == [10, 10, 4, 4]  # by battles
    assert (rows["a", "b"]["wins"], rows["a", "b"]["losses"], rows["a", "b"]["ties"]) == (6, 2, 2)  # tie + both_bad
    assert (rows["b", "a"]["wins"], rows["b", "a"]["losses"], rows["b", "a"]["ties"]) == (2, 6, 2)
    assert rows["b", "a"]["win_rate"] == pytest.approx(0.3) and rows["b", "a"]["predicted"] == pytest.approx(0.35)
    assert rows["c", "a"]["win_rate"] == pytest.approx(0.75)  # exact to 1e-12: 1 - 0.25


@pytest.fixture
def con():
    with duckdb.connect() as connection:
        connection.execute("CREATE SCHEMA arena")
        yield connection


def test_missing_tables_give_empty_frames_of_their_schema(con):
    assert loaded_rows(con).schema == pl.Schema(LOADED_ROWS_SCHEMA) and loaded_rows(con).is_empty()
    assert style_profile(con).schema == pl.Schema(STYLE_PROFILE_SCHEMA) and style_profile(con).is_empty()
    assert table_frame(con, "arena", "pairwise", None) is None
    assert table_frame(con, "arena", "pairwise", PAIRWISE_SCHEMA).schema == pl.Schema(PAIRWISE_SCHEMA)
    assert live_benchmarks(con) is None  # no publication


def test_loaded_rows_counts_battles_then_rules_by_rows(con):
    con.execute("CREATE TABLE arena.battles AS SELECT range AS id FROM range(5)")
    con.execute("CREATE TABLE arena.quarantine AS SELECT * FROM (VALUES ('null_required'), ('same_model'), "
                "('same_model')) t(rule)")
    assert loaded_rows(con).rows() == [("battles", 5), ("same_model", 2), ("null_required", 1)]


def test_style_profile_is_the_mean_per_answer_over_both_sides(con):
    """x answers twice (as A: 100 tokens, 1 + 2 headers; as B: 300 tokens, 4 headers), so does y (50 and 20
    tokens, no header). Of a feature, the columns present are summed (h3 to h6 are absent here); a feature
    with no column at all is unknown (null), not 0. Canonical names are used when present."""
    con.execute("""CREATE TABLE arena.battles AS SELECT * FROM (VALUES
        ('x', 'y', 'x-canon', 'y', 100, 50, 1, 2, 0, 0),
        ('y', 'x', 'y', 'x-canon', 20, 300, 0, 0, 4, 0)) t(model_a, model_b, model_a_canonical,
        model_b_canonical, sum_assistant_a_tokens, sum_assistant_b_tokens, header_count_a_h1,
        header_count_a_h2, header_count_b_h1, header_count_b_h2)""")
    profile = {r["model"]: r for r in style_profile(con).iter_rows(named=True)}
    assert set(profile) == {"x-canon", "y"}
    assert profile["x-canon"]["answers"] == 2 and profile["x-canon"]["tokens"] == pytest.approx(200.0)
    assert profile["x-canon"]["headers"] == pytest.approx(3.5)  # (1 + 2 + 4) / 2
    assert profile["y"]["answers"] == 2 and profile["y"]["tokens"] == pytest.approx(35.0)
    assert profile["y"]["headers"] == 0.0
    assert profile["y"]["lists"] is None and profile["y"]["bold"] is None  # no such columns


def test_quality_summary_counts_a_check_without_outcome_as_failed():
    results = pl.DataFrame({"table_name": ["battles", "battles", "battles", "messages"],
                            "severity": ["error", "warning", None, "error"],
                            "success": [True, False, None, False]})
    summary = quality_summary(results)
    assert summary.schema == pl.Schema(QUALITY_SUMMARY_SCHEMA)
    assert summary.rows() == [("battles", 3, 1, 1, 1), ("messages", 1, 0, 1, 0)]
    assert quality_summary(None).is_empty() and quality_summary(results.clear()).is_empty()
