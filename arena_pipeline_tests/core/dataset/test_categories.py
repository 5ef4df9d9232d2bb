"""Category rules: one golden case per rule, nulls as false, missing columns as unavailable."""

from __future__ import annotations

import polars as pl
import pytest

from arena_pipeline.constants import CATEGORIES
from arena_pipeline.core.dataset.categories import CATEGORY_NAMES, CATEGORY_RULES, tag_categories
from arena_pipeline.core.dataset.schema import BATTLES_SCHEMA, CRITERIA

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
        "language": "en",
        "winner": "model_a",
        **{c: False for c in CRITERIA_COLUMNS},
    }
    schema = {"id": pl.String, **{c: BATTLES_SCHEMA[c] for c in defaults}}
    data = [{"id": f"b{i}", **defaults, **row} for i, row in enumerate(rows)]
    return pl.DataFrame(data, schema=schema)


def members(tagged: pl.DataFrame, category: str) -> list[str]:
    return tagged.filter(pl.col("category") == category).get_column("battle_id").to_list()


def test_one_rule_per_category_seed_categories_first():
    assert CATEGORY_NAMES[: len(CATEGORIES)] == CATEGORIES
    assert len(set(CATEGORY_NAMES)) == len(CATEGORY_RULES) == 20
    # every rule reads battles columns, except no_refusal's, which the dump does not have
    absent = {c for rule in CATEGORY_RULES for c in rule.source_columns} - set(BATTLES_SCHEMA)
    assert absent == {"is_refusal"}


def test_lmarena_boards_by_language_length_ties_and_hardness():
    six = dict.fromkeys(CRITERIA_COLUMNS[:6], True)
    frame = battles(
        [
            {"language": "en", "winner": "model_a", "sum_user_tokens": 5, **six},
            {"language": "zh-Hant", "winner": "tie", "sum_user_tokens": 4, **six},
            {"language": "zh", "winner": "both_bad", "sum_user_tokens": None},
            {"language": None, "winner": "model_b", "sum_user_tokens": 100},
            {"language": "und", "winner": None, "sum_user_tokens": 3},
        ]
    ).with_columns(is_refusal=pl.Series([False, True, None, False, False]))
    tagged, meta = tag_categories(frame)
    assert members(tagged, "english") == ["b0"]
    assert members(tagged, "chinese") == ["b1", "b2"]
    assert members(tagged, "japanese") == []
    assert members(tagged, "hard_prompt_english") == ["b0"]
    assert members(tagged, "hard_prompt") == ["b0", "b1"]
    assert members(tagged, "no_short") == ["b0", "b3"]  # fewer than 5 user tokens excluded
    assert members(tagged, "no_tie") == ["b0", "b3"]  # tie and both_bad dropped; null winner out
    assert members(tagged, "no_refusal") == ["b0", "b3", "b4"]  # unknown refusal is out
    assert meta["english"]["null_as_false"] == 1
    assert meta["no_refusal"]["null_as_false"] == 1
    assert meta["hard_prompt_english"]["null_as_false"] == 1  # the null language


def test_no_refusal_is_unavailable_without_a_refusal_field():
    frame = battles([{"language": "en", "winner": "model_a"}])
    tagged, meta = tag_categories(frame)
    assert meta["no_refusal"]["available"] is False
    assert meta["no_refusal"]["missing_columns"] == ["is_refusal"]
    assert members(tagged, "no_refusal") == []
    assert meta["english"]["available"] is True


def test_longer_query_description_matches_its_rule():
    rule = {r.name: r for r in CATEGORY_RULES}["longer_query"]
    assert (rule.kind, rule.threshold) == ("greater_than", 500)
    assert "> 500" in rule.description


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
    assert seen == [c for c in CATEGORY_NAMES if c in seen]
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
