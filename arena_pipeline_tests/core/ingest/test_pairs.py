"""core.ingest.pairs: arena.preference_pairs, made by the load from each batch's nested rows (golden cases,
the real sample against its flat messages, and the load's table against one whole-dump call)."""

from __future__ import annotations

import datetime as dt
import random
import tempfile
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.constants import PREFERENCE_PAIRS_TABLE
from arena_pipeline.core.dataset.categories import CATEGORY_NAMES, tag_categories
from arena_pipeline.core.dataset.manifest import combine
from arena_pipeline.core.dataset.quarantine import CROSS_DUMP_RULE
from arena_pipeline.core.dataset.schema import CRITERIA, DATASET_ARROW_SCHEMA
from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest.load import load_dump
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.pairs import PAIR_ROWS_SCHEMA, pair_rows
from arena_pipeline.core.ingest.sources import parse_source, read_csv_export
from arena_pipeline_dev import dump_fixtures as fx
from arena_pipeline_dev.fixtures import flatten_table, make_row, make_table, write_dump

SAMPLE = Path(__file__).parents[2] / "data" / "arena_human_preference_sample_100.csv"


def _message(role: str | None, text: str | None, image: str | None = None) -> dict:
    parts = [] if text is None else [{"type": "text", "text": text, "image": None, "mimeType": None}]
    if image is not None:
        parts.append({"type": "image", "text": None, "image": image, "mimeType": "image/png"})
    return {"role": role, "content": parts}


def _vote(vote_id: str, winner: str, conv_a: list[dict], conv_b: list[dict], *, turns: int = 1,
          language: str = "en", is_code: bool = False, self_battle: bool = False) -> dict:
    """A dataset-card row with these conversations; every category flag false, 3 user tokens."""
    row = make_row(random.Random(len(vote_id)), 0, turns=1, evaluation_order=1)
    return {**row, "id": vote_id, "model_a": "gpt-4.1-2025-04-14",
            "model_b": "gpt-4.1-2025-04-14" if self_battle else "gemini-2.5-pro", "winner": winner,
            "conversation_a": conv_a, "conversation_b": [dict(m, num_tokens=None) for m in conv_b],
            "conv_metadata": {**row["conv_metadata"], "turns": turns, "sum_user_tokens": 3},
            "category_tag": {"creative_writing_v0.1": {"creative_writing": False, "score": "no"},
                             "criteria_v0.1": dict.fromkeys(CRITERIA, False),
                             "if_v0.1": {"if": False, "score": 0}, "math_v0.1": {"math": False}},
            "language": language, "is_code": is_code, "timestamp": dt.datetime(2025, 5, 1)}


def _one_turn(prompt: str, reply: str) -> list[dict]:
    return [_message("user", prompt), _message("assistant", reply)]


@pytest.fixture
def votes() -> list[dict]:
    return [
        _vote("one", "model_a", _one_turn("Hi?", "Hello from A"), _one_turn("Hi?", "Hello from B")),
        _vote("multi", "model_b",
              _one_turn("Q1", "A1 by a") + _one_turn("Q2", "A2 by a"),
              _one_turn("Q1", "A1 by b") + _one_turn("Q2", "A2 by b"), turns=2, language="de", is_code=True),
        _vote("tie", "tie", _one_turn("t", "ta"), _one_turn("t", "tb")),
        _vote("bad", "both_bad", _one_turn("x", "xa"), _one_turn("x", "xb")),
        _vote("nomsg", "model_a", [], []),
        _vote("img", "model_b", [_message("user", None, "img://1"), _message("assistant", "a cat")],
              [_message("user", None, "img://1"), _message("assistant", "a dog")], self_battle=True),
        _vote("roles", "model_a",
              [_message("system", "Be brief."), _message("user", "Q"), _message("assistant", "R a"),
               _message("tool call", "ran"), _message(None, "?")],
              [_message("system", "Be brief."), _message("user", "Q"), _message("assistant", "R b")]),
        _vote("noreply", "model_a", _one_turn("Hi?", "Hello from A"), [_message("user", "Hi?")]),
    ]


def _pairs(rows: list[dict]) -> dict[str, dict]:
    """pair_rows of ``rows`` (as one batch), by battle id."""
    table = pa.Table.from_pylist(rows, schema=DATASET_ARROW_SCHEMA)
    out = pair_rows(pl.from_arrow(table), flatten_table(table, "x").battles, "rev")
    assert out.schema == pl.Schema(PAIR_ROWS_SCHEMA)
    return {row["battle_id"]: row for row in out.iter_rows(named=True)}


def test_pair_rows_golden_rows(votes):
    out = _pairs(votes)
    # in the votes' order; ties, both_bad, no messages and a side without a reply left out
    assert list(out) == ["one", "multi", "img", "roles"]
    one = out["one"]
    assert (one["prompt"], one["chosen"], one["rejected"]) == ("User: Hi?", "Assistant: Hello from A",
                                                                "Assistant: Hello from B")
    assert (one["chosen_model"], one["rejected_model"], one["chosen_side"]) == ("gpt-4.1-2025-04-14",
                                                                                "gemini-2.5-pro", "a")
    assert one["categories"] == ["overall", "english", "no_tie"] and one["has_images"] is False
    assert (one["turns"], one["language"], one["dump_revision"]) == (1, "en", "rev")
    assert one["timestamp"] == dt.datetime(2025, 5, 1)


def test_pair_rows_multi_turn_keeps_each_sides_own_history(votes):
    multi = _pairs(votes)["multi"]
    assert (multi["chosen_model"], multi["rejected_model"], multi["chosen_side"]) == ("gemini-2.5-pro",
                                                                                      "gpt-4.1-2025-04-14", "b")
    assert multi["prompt"] == "User: Q1"
    # each side's turns, one "Role: text" paragraph each
    assert multi["chosen"].split("\n\n") == ["Assistant: A1 by b", "User: Q2", "Assistant: A2 by b"]
    assert multi["rejected"].split("\n\n") == ["Assistant: A1 by a", "User: Q2", "Assistant: A2 by a"]
    # prompt + chosen is the chosen side's whole transcript
    assert (multi["prompt"] + "\n\n" + multi["chosen"]).split("\n\n") == ["User: Q1", *multi["chosen"].split("\n\n")]
    # the category rules (core/dataset/categories.py), in board order
    assert multi["categories"] == ["overall", "coding", "multi_turn", "german", "no_tie"]
    assert multi["turns"] == 2 and multi["language"] == "de"


def test_pair_rows_image_only_prompt_self_battle_and_other_roles(votes):
    out = _pairs(votes)
    img = out["img"]
    assert img["has_images"] is True and img["prompt"] == "User: "
    assert img["chosen_model"] == img["rejected_model"] == "gpt-4.1-2025-04-14"
    assert img["chosen"] == "Assistant: a dog" and img["rejected"] == "Assistant: a cat"
    roles = out["roles"]  # what precedes the first user message is the prompt's; roles title-cased, null Unknown
    assert roles["prompt"].split("\n\n") == ["System: Be brief.", "User: Q"]
    assert roles["chosen"].split("\n\n") == ["Assistant: R a", "Tool Call: ran", "Unknown: ?"]
    assert roles["rejected"] == "Assistant: R b"


def test_pair_rows_of_votes_without_a_decision_are_empty():
    table = make_table(20, seed=1)
    shard = flatten_table(table, "x")
    ties = shard.battles.with_columns(winner=pl.lit("tie"))
    out = pair_rows(pl.from_arrow(table), ties, "rev")
    assert out.is_empty() and out.schema == pl.Schema(PAIR_ROWS_SCHEMA)


def _transcripts(messages: pl.DataFrame) -> pl.DataFrame:
    """(battle_id, side) -> the side's messages rendered from arena.messages (user and assistant roles)."""
    marker = pl.col("role").replace_strict({"user": "User", "assistant": "Assistant"})
    return (messages.sort("battle_id", "side", "position")
            .group_by("battle_id", "side", maintain_order=True)
            .agg(pl.concat_str([marker, pl.lit(": "), pl.col("text").fill_null("")]).str.join("\n\n")
                 .alias("transcript")))


def test_pair_rows_of_the_real_sample_are_its_flat_messages():
    """Each pair of the real 100-vote sample read back from arena.messages: prompt + chosen is the chosen
    side's transcript, the rejected side's ends with rejected; every decisive vote with replies is paired."""
    table = read_csv_export(SAMPLE).table
    shard = flatten_table(table, "x")
    pairs = pair_rows(pl.from_arrow(table), shard.battles, "rev")
    sides = _transcripts(shard.messages)
    got = (pairs.with_columns(rejected_side=pl.when(pl.col("chosen_side") == "a").then(pl.lit("b")).otherwise(pl.lit("a")))
           .join(sides.rename({"transcript": "chosen_text"}), left_on=["battle_id", "chosen_side"],
                 right_on=["battle_id", "side"])
           .join(sides.rename({"transcript": "rejected_text"}), left_on=["battle_id", "rejected_side"],
                 right_on=["battle_id", "side"]))
    assert got.height == pairs.height > 50
    assert (got["prompt"] + "\n\n" + got["chosen"] == got["chosen_text"]).all()
    assert got.select(pl.col("rejected_text").str.ends_with("\n\n" + pl.col("rejected"))).to_series().all()
    assert (got["turns"] > 1).any()
    decided = shard.battles.filter(pl.col("winner").is_in(["model_a", "model_b"]))
    assert pairs.get_column("battle_id").to_list() == decided.get_column("id").to_list()  # none lacks a reply


def _categories(battles: pl.DataFrame, ids: pl.Series) -> list[list[str]]:
    """arena.battle_categories' tagging of ``battles`` as each pair's list (board order), for ``ids``."""
    tags, _ = tag_categories(battles)
    lists = (tags.with_columns(order=pl.col("category").replace_strict(
        {c: i for i, c in enumerate(CATEGORY_NAMES)}, return_dtype=pl.Int32))
        .sort("order").group_by("battle_id", maintain_order=True).agg("category"))
    found = dict(zip(lists["battle_id"], lists["category"].to_list(), strict=True))
    return [found.get(i, []) for i in ids]


def test_load_dump_makes_the_pairs_of_every_batch_as_one_call_on_the_whole_dump(tmp_path, monkeypatch):
    """Many small batches over two shards: the load's table is pair_rows of the whole dump at once,
    and each pair's categories are arena.battle_categories' (tag_categories of the loaded battles)."""
    monkeypatch.setattr(ingest, "BATCH_ROWS", 16)
    paths = write_dump(tmp_path, n_rows=120, n_shards=2, seed=5)
    manifest = local_manifest(parse_source(str(tmp_path / "data")))
    with duckdb.connect() as con:
        con.execute("CREATE SCHEMA s")
        report = load_dump(manifest, con, "s")
        loaded = con.execute(f"SELECT * FROM s.{PREFERENCE_PAIRS_TABLE}").pl()
        battles = con.execute("SELECT * FROM s.battles").pl()
    whole = pair_rows(pl.from_arrow(pa.concat_tables([pq.read_table(p) for p in paths])), battles,
                      manifest.revision)
    assert report.pairs == loaded.height == whole.height > 40
    assert loaded.equals(whole)  # in the dump's order too
    assert loaded.get_column("categories").to_list() == _categories(battles, loaded.get_column("battle_id"))


def test_load_dump_pairs_leave_out_votes_kept_from_another_dump():
    """The four dump formats together: content duplicates across dumps are deleted from the pairs too,
    and the categories of votes from dumps that lack a rule's column are still the battle_categories'."""
    with tempfile.TemporaryDirectory() as folder:
        folders = fx.write_family(Path(folder))
        parts = [(dump, local_manifest(parse_source(str(folders[dump] / "train.csv" if dump == fx.DUMP_55K
                                                         else folders[dump]))))
                 for dump in (fx.DUMP_140K, fx.DUMP_100K, fx.DUMP_55K, fx.DUMP_33K)]
        with duckdb.connect() as con:
            con.execute("CREATE SCHEMA s")
            report = load_dump(combine(parts), con, "s")
            loaded = con.execute(f"SELECT * FROM s.{PREFERENCE_PAIRS_TABLE}").pl()
            battles = con.execute("SELECT * FROM s.battles").pl()
            moved = con.execute("SELECT count(*) FROM s.quarantine WHERE rule = ?", [CROSS_DUMP_RULE]).fetchone()[0]
    assert moved > 0
    assert loaded.join(battles, left_on="battle_id", right_on="id", how="anti").is_empty()
    assert report.pairs == loaded.height > 0
    assert loaded.get_column("categories").to_list() == _categories(battles, loaded.get_column("battle_id"))
    assert set(loaded["dump_revision"]) == {combine(parts).revision}
