"""Flattening nested dump rows into battles, messages and context_messages."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from arena_pipeline.core.dataset.schema import (
    BATTLES_NESTED_PATHS,
    CONTEXT_MESSAGES_SCHEMA,
    DATASET_ARROW_SCHEMA,
    FLAT_BATTLES_SCHEMA,
    MESSAGES_SCHEMA,
)
from arena_pipeline.core.ingest.sources import read_csv_export
from arena_pipeline_dev.fixtures import flatten_table, make_row, make_rows

REAL_CSV = Path(__file__).parents[2] / "data" / "arena_human_preference_sample_100.csv"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return make_rows(30, seed=3)


@pytest.fixture(scope="module")
def flat(rows):
    return flatten_table(pa.Table.from_pylist(rows, schema=DATASET_ARROW_SCHEMA), "shard.parquet", 100)


def _get(row: dict, path: tuple[str, ...]):
    value = row
    for name in path:
        value = value[name]
    return value


def test_schemas_are_exact(flat):
    assert dict(flat.battles.schema) == FLAT_BATTLES_SCHEMA  # narrowed after quarantine
    assert dict(flat.messages.schema) == MESSAGES_SCHEMA
    assert dict(flat.context_messages.schema) == CONTEXT_MESSAGES_SCHEMA


def test_every_nested_scalar_is_a_column_with_the_row_value(rows, flat):
    assert flat.battles.height == len(rows)
    for i, row in enumerate(rows):
        got = flat.battles.row(i, named=True)
        assert got["id"] == row["id"]
        assert got["source_file"] == "shard.parquet" and got["source_row"] == 100 + i
        for column, path in BATTLES_NESTED_PATHS.items():
            assert got[column] == _get(row, path), (i, column)


def test_multi_turn_battle_messages_and_turns(rows, flat):
    row = rows[0]  # 3 turns at evaluation order 2 (fixtures.make_rows)
    battle = flat.battles.filter(pl.col("id") == row["id"]).row(0, named=True)
    assert battle["turns"] == 3
    assert battle["n_messages_a"] == 6 and battle["n_user_messages_a"] == 3
    assert battle["n_user_messages_b"] == 3
    assert battle["full_conversation_turns"] == 4
    msgs = flat.messages.filter(pl.col("battle_id") == row["id"]).sort("side", "position")
    assert msgs.height == 12
    side_a = msgs.filter(pl.col("side") == "a")
    assert side_a["turn"].to_list() == [1, 1, 2, 2, 3, 3]
    assert side_a["role"].to_list() == ["user", "assistant"] * 3
    assert side_a["text"].to_list() == [m["content"][0]["text"] for m in row["conversation_a"]]
    assert side_a["num_tokens"].null_count() == 6  # conversation_a has no num_tokens
    side_b = msgs.filter(pl.col("side") == "b")
    assert side_b["num_tokens"].to_list() == [m["num_tokens"] for m in row["conversation_b"]]


def test_context_messages_keep_only_earlier_orders(rows, flat):
    row = rows[0]
    ctx = flat.context_messages.filter(pl.col("battle_id") == row["id"])
    # one earlier turn (evaluation order 2) x three slots, none of them the vote's own turns
    assert ctx.height == 3
    assert set(ctx["slot"]) == {"user", "model_side_a", "model_side_b"}
    assert ctx["context_turn"].to_list() == [0, 0, 0]
    assert not ctx["is_current"].any()
    user = ctx.filter(pl.col("slot") == "user")["text"][0]
    assert user == row["full_conversation"][0]["user"]["content"][0]["text"]


def test_context_messages_total_matches_fixture(rows, flat):
    expected = sum(3 * (r["evaluation_order"] - 1) for r in rows)
    assert flat.context_messages.height == expected


def test_mismatched_tail_keeps_whole_full_conversation():
    row = make_row(random.Random(1), 4, turns=1, evaluation_order=2)
    row = copy.deepcopy(row)  # fixture rows share message dicts between the conversations
    row["full_conversation"][-1]["user"] = {"role": "user", "content": [
        {"type": "text", "text": "something else", "image": None, "mimeType": None}]}
    flat = flatten_table(pa.Table.from_pylist([row], schema=DATASET_ARROW_SCHEMA), "x")
    assert flat.context_messages.height == 6
    assert flat.context_messages["is_current"].sum() == 3


def test_images_and_empty_texts(rows, flat):
    with_image = [r for r in rows if any(len(m["content"]) > 1 for m in r["conversation_a"])]
    assert with_image, "fixture must contain a message with an image part"
    msgs = flat.messages.filter(pl.col("battle_id") == with_image[0]["id"], pl.col("n_parts") == 2)
    assert msgs["content_type"][0] == "text,image"
    assert msgs["images"][0].to_list()[0].startswith("https://img.example/")
    empty = flat.messages.filter(pl.col("battle_id") == rows[1]["id"], pl.col("role") == "user")
    assert empty["text"].to_list() == ["", ""]


def test_non_english_text_survives(rows, flat):
    texts = set(flat.messages["text"].to_list())
    assert "日本の首都はどこですか？" in texts or any("Écris" in t for t in texts)


def test_real_csv_rows_flatten_completely():
    parsed = read_csv_export(REAL_CSV)
    assert parsed.rows_read == 100 and parsed.quarantine.height == 0
    flat = flatten_table(parsed.table, REAL_CSV.name)
    assert flat.battles.height == 100
    assert flat.battles["id"].n_unique() == 100
    expected_messages = sum(len(c) for c in parsed.table.column("conversation_a").to_pylist()) + sum(
        len(c) for c in parsed.table.column("conversation_b").to_pylist()
    )
    assert flat.messages.height == expected_messages
    first = flat.battles.row(0, named=True)
    assert first["id"] == "c4b9710c-8d64-4bee-a0b0-94637ae4cc65"
    assert first["sum_assistant_a_tokens"] == 1854 and first["bold_count_a_asterisk"] == 65
    assert first["header_count_a_h3"] == 8 and first["list_count_a_unordered"] == 39
    assert first["criteria_domain_knowledge"] is True and first["instruction_following_score"] == 1
    msgs = flat.messages.filter(pl.col("battle_id") == first["id"], pl.col("side") == "a")
    assert msgs["text"][0] == "Compare Tormenta20 with DnD5e"
    # every vote's own turns agree with conv_metadata.turns on both sides in the real sample
    assert (flat.battles["turns"] == flat.battles["n_user_messages_a"]).all()
    assert (flat.battles["turns"] == flat.battles["n_user_messages_b"]).all()
    assert not flat.context_messages["is_current"].any()
