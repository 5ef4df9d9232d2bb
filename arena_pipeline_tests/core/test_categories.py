"""Category rules: one golden case per rule, nulls as false, missing columns as unavailable."""

from __future__ import annotations

import polars as pl
import pytest

from arena_pipeline.constants import CATEGORIES
from arena_pipeline.core.categories import CATEGORY_RULES, tag_categories
from arena_pipeline.core.schema import BATTLES_SCHEMA, CRITERIA

CRITERIA_COLUMNS = [f"criteria_{c}" for c in CRITERIA]


def battles(rows: list[dict]) -> pl.DataFrame:
    """A battles frame with the rule columns; unspecified values are false / small / null."""
    defaults = {
        "creative_writing": False,
        "math": False,
        "instruction_following": False,
        "is_code": False,
        "sum_user_tokens": 10,
        "turns": 1,
        **{c: False for c in CRITERIA_COLUMNS},
    }
    schema = {"id": pl.String, **{c: BATTLES_SCHEMA[c] for c in defaults}}
    data = [{"id": f"b{i}", **defaults, **row} for i, row in enumerate(rows)]
    return pl.DataFrame(data, schema=schema)


def members(tagged: pl.DataFrame, category: str) -> list[str]:
    return tagged.filter(pl.col("category") == category).get_column("battle_id").to_list()


def test_one_rule_per_category_in_constants_order():
    assert tuple(rule.name for rule in CATEGORY_RULES) == CATEGORIES
    assert all(c in BATTLES_SCHEMA for rule in CATEGORY_RULES for c in rule.columns)


@pytest.mark.parametrize(
    ("category", "column"),
    [
        ("creative_writing", "creative_writing"),
        ("math", "math"),
        ("instruction_following", "instruction_following"),
        ("coding", "is_code"),
    ],
)
def test_flag_rules_count_null_as_false(category, column):
    frame = battles([{column: True}, {column: False}, {column: None}])
    tagged, meta = tag_categories(frame)
    assert members(tagged, category) == ["b0"]
    assert meta[category]["battles"] == 1
    assert meta[category]["null_as_false"] == 1
    assert meta[category]["available"] is True


def test_hard_prompt_needs_six_of_seven_criteria():
    six = dict.fromkeys(CRITERIA_COLUMNS[:6], True)
    five = dict.fromkeys(CRITERIA_COLUMNS[:5], True)
    frame = battles(
        [
            dict.fromkeys(CRITERIA_COLUMNS, True),  # 7 -> in
            six,  # 6 -> in
            five,  # 5 -> out
            {**six, CRITERIA_COLUMNS[6]: None},  # 6 + a null -> in
            {**five, CRITERIA_COLUMNS[5]: None},  # 5 + a null (would be the 6th) -> out
        ]
    )
    tagged, meta = tag_categories(frame)
    assert members(tagged, "hard_prompt") == ["b0", "b1", "b3"]
    assert meta["hard_prompt"]["null_as_false"] == 2


def test_threshold_rules_are_strict_and_nulls_are_out():
    frame = battles(
        [
            {"sum_user_tokens": 501, "turns": 2},
            {"sum_user_tokens": 500, "turns": 1},
            {"sum_user_tokens": None, "turns": None},
        ]
    )
    tagged, meta = tag_categories(frame)
    assert members(tagged, "longer_query") == ["b0"]
    assert members(tagged, "multi_turn") == ["b0"]
    assert meta["longer_query"]["null_as_false"] == 1
    assert meta["multi_turn"]["null_as_false"] == 1


def test_overall_holds_every_battle_and_output_is_long_and_ordered():
    frame = battles([{"math": True, "is_code": True}, {}, {"creative_writing": True}])
    tagged, meta = tag_categories(frame)
    assert tagged.schema == pl.Schema({"battle_id": pl.String, "category": pl.String})
    assert members(tagged, "overall") == ["b0", "b1", "b2"]
    seen = tagged.get_column("category").unique(maintain_order=True).to_list()
    assert seen == [c for c in CATEGORIES if c in seen]
    assert meta["overall"] == {
        "available": True,
        "missing_columns": [],
        "battles": 3,
        "null_as_false": 0,
        "rule": "every battle",
    }


def test_missing_source_columns_make_a_category_unavailable():
    # the real vote table has no is_code, sum_user_tokens or turns
    frame = battles([{"math": True}, {}]).drop("is_code", "sum_user_tokens", "turns")
    tagged, meta = tag_categories(frame)
    for category, column in [
        ("coding", "is_code"),
        ("longer_query", "sum_user_tokens"),
        ("multi_turn", "turns"),
    ]:
        assert meta[category]["available"] is False
        assert meta[category]["missing_columns"] == [column]
        assert meta[category]["battles"] is None
        assert members(tagged, category) == []
    assert members(tagged, "math") == ["b0"]


def test_no_rule_columns_at_all_still_tags_overall():
    tagged, meta = tag_categories(pl.DataFrame({"id": ["x", "y"]}))
    assert members(tagged, "overall") == ["x", "y"]
    assert [c for c, m in meta.items() if m["available"]] == ["overall"]
