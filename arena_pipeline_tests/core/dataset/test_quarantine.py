"""Golden cases for core.quarantine: one per rule, duplicates, the row-count invariant, and
agreement with the error expectations of expectations/battles.json."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from arena_pipeline.core.dataset.quarantine import (
    ALL_RULES,
    RULES,
    count_by_rule,
    split_quarantine,
)
from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA, QUARANTINE_SCHEMA
from arena_pipeline.core.validation import quality
from arena_pipeline_tests.support.battle_frames import make_battles, with_values


def split(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    clean, quarantine = split_quarantine(frame)
    assert clean.height + quarantine.height == frame.height
    assert clean.schema == frame.schema
    assert quarantine.schema == pl.Schema(QUARANTINE_SCHEMA)
    return clean, quarantine


def test_good_frame_is_all_clean():
    frame = make_battles(12)
    clean, quarantine = split(frame)
    assert quarantine.is_empty()
    assert clean.equals(frame)


# (rule, new values for row 1, fragment of the detail)
RULE_CASES = [
    ("null_id", {"id": None}, "id is null"),
    ("unknown_winner", {"winner": "draw"}, "winner=draw is not one of model_a, model_b"),
    ("unknown_winner", {"winner": None}, "winner=null"),
    ("null_model", {"model_a": None}, "model_a=null, model_b=gpt-4.1-2025-04-14"),
    ("null_model", {"model_b": None}, "model_b=null"),
    ("same_model", {"model_b": "claude-opus-4-20250514"}, "both claude-opus-4-20250514"),
    (
        "invalid_turns",
        {"turns": 0, "n_user_messages_a": 0, "n_user_messages_b": 0},
        "turns=0 is not at least 1",
    ),
    ("invalid_turns", {"turns": None}, "turns=null"),
    (
        "turns_mismatch",
        {"n_user_messages_b": 2},
        "turns=1 but conversation_a has 1 user messages and conversation_b has 2",
    ),
    ("empty_conversation", {"n_messages_a": 0}, "conversation_a has 0 messages"),
    ("negative_tokens", {"sum_user_tokens": -1}, "negative token count: sum_user_tokens=-1"),
    (
        "negative_tokens",
        {"context_b_tokens": -2, "sum_assistant_a_tokens": -3},
        "sum_assistant_a_tokens=-3, context_b_tokens=-2",
    ),
    ("negative_markdown_count", {"header_count_b_h6": -1}, "header_count_b_h6=-1"),
    ("null_required", {"is_code": None}, "null in required columns: is_code"),
    (
        "null_required",
        {"list_count_a_ordered": None, "math": None},
        "list_count_a_ordered, math",
    ),
    ("null_required", {"n_user_messages_a": None}, "n_user_messages_a"),
]


@pytest.mark.parametrize(("rule", "values", "detail"), RULE_CASES)
def test_rule_golden(rule, values, detail):
    frame = with_values(make_battles(4), 1, **values)
    clean, quarantine = split(frame)
    assert clean["id"].to_list() == ["id-0000", "id-0002", "id-0003"]
    row = quarantine.row(0, named=True)
    assert row["rule"] == rule
    assert detail in row["detail"]
    assert row["id"] == frame["id"][1]
    assert (row["source_file"], row["source_row"]) == ("data/train-00000-of-00001.parquet", 1)


def test_warning_level_problems_are_not_quarantined():
    frame = make_battles(6)
    for row, values in {
        0: {"creative_writing_score": "nononoyesyes"},
        1: {"creative_writing_score": None, "instruction_following_score": None},
        2: {"language": None, "timestamp": None, "evaluation_order": 0},
        3: {"sum_user_tokens": 0, "context_a_tokens": None},
    }.items():
        frame = with_values(frame, row, **values)
    clean, quarantine = split(frame)
    assert quarantine.is_empty()


def test_several_rules_make_one_row_with_all_names(golden):
    frame = with_values(make_battles(3), 2, winner="x", model_a=None, sum_user_tokens=-1)
    _clean, quarantine = split(frame)
    assert quarantine.height == 1
    row = quarantine.row(0, named=True)
    assert row["rule"] == "unknown_winner,null_model,negative_tokens"
    assert len(row["detail"].split("; ")) == 3  # one detail per rule
    golden.check("quarantine", "several rules: details", row["detail"])


def test_raw_holds_the_row_values():
    frame = with_values(make_battles(3), 1, winner="x")
    _clean, quarantine = split(frame)
    raw = json.loads(quarantine["raw"][0])
    assert list(raw) == list(BATTLES_SCHEMA)
    assert raw["winner"] == "x"
    assert raw["id"] == "id-0001"
    assert raw["turns"] == frame["turns"][1]
    assert raw["timestamp"].startswith("2025-05-01")


# ---------------------------------------------------------------------------
# Duplicates
# ---------------------------------------------------------------------------


def test_duplicate_keeps_first_by_source_position_not_input_order(golden):
    frame = make_battles(4)
    # row 3 repeats id-0001 from an earlier position of the same file; input order has it last
    frame = with_values(frame, 3, id="id-0001", source_row=0)
    frame = with_values(frame, 0, source_row=10)
    clean, quarantine = split(frame)
    assert clean["source_row"].to_list() == [10, 2, 0]  # input order kept
    assert quarantine.drop("detail", "raw").rows() == [
        ("id-0001", "data/train-00000-of-00001.parquet", 1, "duplicate_id", "lmarena-ai/arena-human-preference-140k")]
    golden.check("quarantine", "a duplicate id: detail", quarantine["detail"][0])


def test_duplicate_order_across_files_and_null_positions():
    frame = make_battles(4)
    frame = with_values(frame, 0, id="dup", source_file="b.parquet", source_row=0)
    frame = with_values(frame, 1, id="dup", source_file="a.parquet", source_row=5)
    frame = with_values(frame, 2, id="dup", source_file=None, source_row=None)
    clean, quarantine = split(frame)
    assert clean.filter(pl.col("id") == "dup")["source_file"].to_list() == ["a.parquet"]
    assert quarantine["rule"].to_list() == ["duplicate_id", "duplicate_id"]
    assert quarantine["source_file"].to_list() == ["b.parquet", None]


def test_duplicate_keeps_the_first_valid_copy(golden):
    frame = make_battles(4)
    frame = with_values(frame, 2, id="id-0000", source_row=9)  # later copy, valid
    frame = with_values(frame, 0, winner="nobody")  # first copy, broken
    clean, quarantine = split(frame)
    assert clean.filter(pl.col("id") == "id-0000")["source_row"].to_list() == [9]
    assert quarantine["rule"].to_list() == ["unknown_winner,duplicate_id"]
    golden.check("quarantine", "a broken first copy of a duplicate: detail", quarantine["detail"][0])


def test_duplicate_with_every_copy_broken_keeps_none():
    frame = make_battles(3)
    frame = with_values(frame, 1, id="id-0000", turns=None)
    frame = with_values(frame, 0, winner=None)
    clean, quarantine = split(frame)
    assert "id-0000" not in clean["id"].to_list()
    assert quarantine["rule"].to_list() == [
        "unknown_winner,duplicate_id",
        "invalid_turns,duplicate_id",
    ]
    assert "every copy breaks another rule" in quarantine["detail"][0]


def test_null_ids_are_not_duplicates():
    frame = make_battles(3)
    frame = with_values(with_values(frame, 0, id=None), 1, id=None)
    _clean, quarantine = split(frame)
    assert quarantine["rule"].to_list() == ["null_id", "null_id"]


def test_exact_duplicate_rows():
    frame = make_battles(3)
    frame = pl.concat([frame, frame.head(1).with_columns(pl.lit(3, pl.Int64).alias("source_row"))])
    clean, quarantine = split(frame)
    assert clean["id"].to_list() == ["id-0000", "id-0001", "id-0002"]
    assert quarantine["source_row"].to_list() == [3]


# ---------------------------------------------------------------------------
# Invariants
# ---------------------------------------------------------------------------


def _randomly_broken(n: int, seed: int) -> pl.DataFrame:
    """n battles where about a third of the rows break one or two random rule cases."""
    rng = np.random.default_rng(seed)
    frame = make_battles(n)
    cases = [values for _rule, values, _detail in RULE_CASES]
    for row in rng.choice(n, size=n // 3, replace=False):
        for k in rng.choice(len(cases), size=rng.integers(1, 3), replace=False):
            values = dict(cases[k])
            if values.get("model_b") == "claude-opus-4-20250514":  # same_model, for any row
                values["model_b"] = frame["model_a"][int(row)]
            frame = with_values(frame, int(row), **values)
    for row in rng.choice(n, size=n // 10, replace=False):  # some repeated ids
        frame = with_values(frame, int(row), id=f"id-{rng.integers(0, n):04d}")
    return frame


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_in_equal_clean_plus_quarantine(seed):
    frame = _randomly_broken(60, seed)
    clean, quarantine = split(frame)
    assert quarantine.height > 0
    # every input row is in exactly one output, by source position
    positions = pl.concat([clean.select("source_row"), quarantine.select("source_row")])
    assert sorted(positions["source_row"].to_list()) == sorted(frame["source_row"].to_list())
    assert clean["id"].is_unique().all() and clean["id"].null_count() == 0
    # rule names are known, in rule order
    names = [r.name for r in ALL_RULES]
    for rule in quarantine["rule"]:
        parts = rule.split(",")
        assert parts == sorted(parts, key=names.index)
    counts = dict(count_by_rule(quarantine).iter_rows())
    assert sum(counts.values()) == sum(len(r.split(",")) for r in quarantine["rule"])


def test_count_by_rule_order():
    frame = with_values(with_values(make_battles(3), 0, winner="x", id=None), 2, winner="y")
    _clean, quarantine = split(frame)
    assert count_by_rule(quarantine).rows() == [("null_id", 1), ("unknown_winner", 2)]


def test_missing_columns_are_an_error():
    with pytest.raises(ValueError, match="turns"):
        split_quarantine(make_battles(2).drop("turns"))


# ---------------------------------------------------------------------------
# Agreement with the GX suite
# ---------------------------------------------------------------------------


def _row_level_error_ids() -> set[str]:
    data = quality.read_suite("battles")
    return {
        e["id"]
        for e in data["expectations"]
        if e["meta"]["severity"] == "error"
        and e["type"] not in quality.SCHEMA_EXPECTATION_TYPES
        and not e["type"].startswith("expect_table_")
    }


def test_rules_cover_every_row_level_error_expectation():
    covered = {exp for rule in ALL_RULES for exp in rule.expectations}
    assert covered == _row_level_error_ids()
    assert len({r.name for r in ALL_RULES}) == len(ALL_RULES) == len(RULES) + 1


def test_after_quarantine_error_expectations_pass():
    frame = _randomly_broken(60, seed=3)
    before = quality.validate_frame(frame, "battles")
    assert not before.passed_errors
    clean, quarantine = split(frame)
    after = quality.validate_frame(clean, "battles")
    assert after.passed_errors, after.failures("error")
    # and every error that failed before names a rule that fired
    fired = {name for rule in quarantine["rule"] for name in rule.split(",")}
    by_expectation = {exp: r.name for r in ALL_RULES for exp in r.expectations}
    for exp_id in before.failures("error")["expectation_id"]:
        assert by_expectation[exp_id] in fired


def test_count_out_of_range_names_the_field_and_narrows_clean_rows(golden):
    from arena_pipeline.core.dataset.schema import FLAT_BATTLES_SCHEMA, NARROWED_COLUMNS

    assert {"sum_user_tokens", "turns", "context_a_tokens"} <= set(NARROWED_COLUMNS)
    frame = make_battles(4).cast(FLAT_BATTLES_SCHEMA)
    frame = with_values(frame, 1, sum_user_tokens=2**63 - 1)
    frame = with_values(frame, 3, context_b_tokens=-(2**40))
    clean, quarantine = split_quarantine(frame)
    assert clean.schema == pl.Schema(BATTLES_SCHEMA)
    assert clean["id"].to_list() == ["id-0000", "id-0002"]
    assert quarantine["rule"].to_list() == ["count_out_of_range", "count_out_of_range,negative_tokens"]
    golden.check("quarantine", "counts out of range: details", "\n".join(quarantine["detail"]))
