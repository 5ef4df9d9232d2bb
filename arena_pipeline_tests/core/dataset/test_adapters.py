"""Schema adapters: each public dump format, chosen by its columns, becomes the canonical schema."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.core.dataset.adapters import (
    ARENA_100K,
    ARENA_140K,
    CHATBOT_ARENA_33K,
    CONVERTED_SCHEMA,
    KAGGLE_55K,
    UnknownFormatError,
    choose_adapter,
    csv_schema,
)
from arena_pipeline.core.dataset.dumps import dump_battles, unavailable_columns
from arena_pipeline.core.dataset.manifest import combine, combined_revision
from arena_pipeline.core.dataset.quarantine import CROSS_DUMP_RULE
from arena_pipeline.core.dataset.schema import DATASET_ARROW_SCHEMA
from arena_pipeline.core.ingest.load import load_dump
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.sources import SourceError, compare_schema, parse_source, verify_shard
from arena_pipeline.core.validation.quality import validate_frame
from arena_pipeline_dev import dump_fixtures as fx
from arena_pipeline_dev.quality_reference import validate_dumps


@pytest.fixture(scope="module")
def tables() -> dict[str, pa.Table]:
    t33 = fx.make_33k()
    t100 = fx.make_100k(shared=t33)
    t55 = pl.read_csv(io.BytesIO(fx.make_55k_csv(shared=t100)), infer_schema=False).to_arrow()
    return {"33k": t33, "100k": t100, "55k": t55}


def test_each_format_is_chosen_by_its_columns(tables):
    assert choose_adapter(tables["33k"].schema) is CHATBOT_ARENA_33K
    assert choose_adapter(tables["100k"].schema) is ARENA_100K
    assert choose_adapter(csv_schema(tables["55k"].column_names)) is KAGGLE_55K
    assert choose_adapter(DATASET_ARROW_SCHEMA) is ARENA_140K
    # column order and extra columns do not matter; a renamed copy is the same format
    shuffled = tables["33k"].select(list(reversed(tables["33k"].column_names))).append_column(
        "mirror_note", pa.array(["x"] * tables["33k"].num_rows))
    assert choose_adapter(shuffled.schema) is CHATBOT_ARENA_33K


def test_unknown_schema_names_its_columns_and_the_nearest_format(tables, golden):
    renamed = tables["100k"].rename_columns(
        ["qid" if c == "question_id" else c for c in tables["100k"].column_names])
    with pytest.raises(UnknownFormatError) as err:
        choose_adapter(renamed.schema, "x.parquet")
    golden.check("load", "a file of no known format: the nearest named", str(err.value))
    wrong_type = tables["33k"].set_column(
        tables["33k"].schema.get_field_index("tstamp"), "tstamp", pa.array(["x"] * tables["33k"].num_rows))
    with pytest.raises(UnknownFormatError) as err:
        choose_adapter(wrong_type.schema)
    golden.check("load", "a file of no known format: a column of another type", str(err.value))


def test_unknown_parquet_file_fails_verification_with_the_nearest_format(tmp_path, tables, golden):
    path = tmp_path / "odd.parquet"
    pq.write_table(tables["33k"].drop(["judge"]), path)
    with pytest.raises(SourceError) as err:
        verify_shard(path)
    golden.check("load", "a parquet file of no known format", str(err.value))
    good = tmp_path / "good.parquet"
    pq.write_table(tables["33k"], good)
    assert verify_shard(good) == fx.ROWS[fx.DUMP_33K]


def test_conversations_format_to_canonical(tables):
    source = tables["33k"]
    out = CHATBOT_ARENA_33K.convert(source)
    # the card's schema, counts as int64 (any integer width passes the card check)
    assert out.schema == CONVERTED_SCHEMA and not compare_schema(out.schema).fatal
    frame = pl.from_arrow(out)
    raw = pl.from_arrow(source)
    # winners: the four canonical values, 'tie (bothbad)' -> both_bad, row for row
    expected = raw.get_column("winner").replace({"tie (bothbad)": "both_bad"})
    assert frame.get_column("winner").to_list() == expected.to_list()
    assert "tie (bothbad)" in raw.get_column("winner").to_list()
    # epoch seconds -> UTC timestamps (microseconds)
    first = dt.datetime.fromtimestamp(raw["tstamp"][0], dt.UTC).replace(tzinfo=None)
    assert abs(frame["timestamp"][0] - first) < dt.timedelta(microseconds=1)
    # language names -> the 140k codes; unknown names are kept
    assert dict(zip(raw["language"], frame["language"], strict=True)) == {
        "English": "en", "Chinese": "zh", "German": "de", "Spanish": "es", "unknown": "unknown"}
    # OpenAI-format messages -> one text part each, roles and order kept
    msg = frame["conversation_a"][0].to_list()
    assert [m["role"] for m in msg] == [m["role"] for m in source.column("conversation_a")[0].as_py()]
    assert msg[0]["content"] == [{"type": "text", "text": source.column("conversation_a")[0].as_py()[0]["content"],
                                  "image": None, "mimeType": None}]
    # fields the format lacks are null; turns comes from 'turn'
    assert frame["conv_metadata"].struct.field("turns").to_list() == raw["turn"].to_list()
    assert frame["conv_metadata"].struct.field("sum_user_tokens").null_count() == frame.height
    assert frame["category_tag"].null_count() == frame.height
    assert frame["is_code"].null_count() == frame.height
    assert frame["full_conversation"].null_count() == frame.height


def test_100k_keeps_its_metadata_and_tags(tables):
    out = pl.from_arrow(ARENA_100K.convert(tables["100k"]))
    raw = pl.from_arrow(tables["100k"])
    assert out["conv_metadata"].struct.field("sum_user_tokens").to_list() == \
        raw["conv_metadata"].struct.field("sum_user_tokens").to_list()
    assert out["conv_metadata"].struct.field("header_count_a").struct.field("h2").to_list() == \
        raw["conv_metadata"].struct.field("header_count_a").struct.field("h2").to_list()
    assert out["category_tag"].struct.field("math_v0.1").struct.field("math").to_list() == \
        raw["category_tag"].struct.field("math_v0.1").struct.field("math").to_list()
    # the 100k card has no creative_writing_v0.1: null, not false
    assert out["category_tag"].struct.field("creative_writing_v0.1").null_count() == out.height
    assert out["is_code"].to_list() == raw["is_code"].to_list()


def test_kaggle_csv_to_canonical():
    csv = (
        "id,model_a,model_b,prompt,response_a,response_b,winner_model_a,winner_model_b,winner_tie\n"
        '1,m1,m2,"[""hi"",""more""]","[""a1"",""a2""]","[""b1"",null]",0,1,0\n'
        '2,m1,m2,"[""q""]","[""a""]","[""b""]",0,0,1\n'
        '3,m1,m2,"[""q""]","[""a""]","[""b""]",1,1,0\n'
        '4,m1,m2,not json,"[""a""]","[""b""]",1,0,0\n'
    )
    table = pl.read_csv(io.BytesIO(csv.encode()), infer_schema=False).to_arrow()
    assert choose_adapter(csv_schema(table.column_names)) is KAGGLE_55K
    out = pl.from_arrow(KAGGLE_55K.convert(table))
    assert out["id"].to_list() == ["1", "2", "3", "4"]
    assert out["winner"].to_list()[:2] == ["model_b", "tie"]
    # a one-hot row that is not one-hot keeps its values, so unknown_winner quarantines it by name
    assert out["winner"][2] == "winner_model_a=1, winner_model_b=1, winner_tie=0"
    conv_b = out["conversation_b"][0].to_list()
    assert [(m["role"], m["content"][0]["text"]) for m in conv_b] == [
        ("user", "hi"), ("assistant", "b1"), ("user", "more"), ("assistant", None)]
    assert out["conv_metadata"].struct.field("turns").to_list()[:3] == [2, 1, 1]
    assert out["conversation_a"][3] is None  # undecodable prompt: no conversation (empty_conversation)
    assert out["timestamp"].null_count() == 4 and out["language"].null_count() == 4


def _family_manifest(tmp_path: Path, order=(fx.DUMP_140K, fx.DUMP_100K, fx.DUMP_55K, fx.DUMP_33K)):
    folders = fx.write_family(tmp_path)
    parts = []
    for dump in order:
        source = folders[dump] / "train.csv" if dump == fx.DUMP_55K else folders[dump]
        parts.append((dump, local_manifest(parse_source(str(source)))))
    return combine(parts)


@pytest.fixture(scope="module")
def combined(tmp_path_factory):
    manifest = _family_manifest(tmp_path_factory.mktemp("family"))
    con = duckdb.connect()
    con.execute("CREATE SCHEMA s")
    report = load_dump(manifest, con, "s")
    yield manifest, con, report
    con.close()


def test_combined_load_counts_per_dump(combined):
    manifest, con, report = combined
    counts = dict(con.execute("SELECT dump, count(*) FROM s.battles GROUP BY dump").fetchall())
    # the 100k dump repeats 3 question ids of the 33k; the 55k repeats 4 votes of the 100k by
    # content; the 33k and 100k hold a few votes cast with the model names shown
    anon = fx.NOT_ANONYMOUS
    assert counts == {
        fx.DUMP_140K: fx.ROWS[fx.DUMP_140K],
        fx.DUMP_100K: fx.ROWS[fx.DUMP_100K] - anon[fx.DUMP_100K],
        fx.DUMP_55K: fx.ROWS[fx.DUMP_55K] - fx.SHARED_CONTENT_ROWS,
        fx.DUMP_33K: fx.ROWS[fx.DUMP_33K] - fx.SHARED_ID_ROWS - anon[fx.DUMP_33K],
    }
    assert report.rows_read == sum(fx.ROWS.values()) == report.battles + report.quarantined
    assert report.quarantine_by_rule == {CROSS_DUMP_RULE: fx.SHARED_ID_ROWS + fx.SHARED_CONTENT_ROWS,
                                         "not_anonymous": sum(anon.values())}
    assert report.per_dump[fx.DUMP_33K]["kept_in_another_dump"] == fx.SHARED_ID_ROWS
    assert report.per_dump[fx.DUMP_55K] == {
        "format": "arena-55k", "battles": 26, "quarantined": 4, "kept_in_another_dump": 4,
        "conflicting_duplicates": 0, "rows_read": 30}
    assert manifest.revision == combined_revision({d: r for d, _, r in manifest.parts})
    for table in ("messages", "quarantine"):
        dumps = {d for (d,) in con.execute(f"SELECT DISTINCT dump FROM s.{table}").fetchall()}
        assert None not in dumps


def test_combined_ids_stay_unique_and_duplicates_point_at_the_kept_vote(combined, golden):
    _, con, _ = combined
    battles = con.execute("SELECT * FROM s.battles").pl()
    assert battles["id"].is_unique().all()
    assert battles.select("source_file", "source_row").is_unique().all()
    shared = battles.filter(pl.col("also_in_dumps").is_not_null())
    # the 100k's first 3 votes are the 33k's; the 55k repeats its first 4 that are not both-bad (rows 0, 1, 3, 4)
    assert shared.height == 5 and set(shared["dump"]) == {fx.DUMP_100K}
    assert sorted(shared["also_in_dumps"].to_list()) == sorted(
        [f"{fx.DUMP_55K},{fx.DUMP_33K}"] * 2 + [fx.DUMP_33K] + [fx.DUMP_55K] * 2)
    # a dropped duplicate leaves no messages behind; every message belongs to a kept battle
    orphans = con.execute("SELECT count(*) FROM s.messages m ANTI JOIN s.battles b ON m.battle_id = b.id").fetchone()
    assert orphans == (0,)
    quarantined = con.execute(f"SELECT id, dump, detail FROM s.quarantine WHERE rule = '{CROSS_DUMP_RULE}'").fetchall()
    assert len(quarantined) == 7
    golden.check("load", "a vote another dump holds: quarantine detail", quarantined[0][2],
                 {quarantined[0][0]: "<id>", quarantined[0][1]: "<dump>"})
    assert {re.search(r"kept from dump (\S+)", detail).group(1) for *_, detail in quarantined} == {fx.DUMP_100K}
    # the per-dump view of the 33k dump has its own battles and the 3 it shares with the 100k
    assert dump_battles(battles, fx.DUMP_33K).height == fx.ROWS[fx.DUMP_33K] - fx.NOT_ANONYMOUS[fx.DUMP_33K]
    assert dump_battles(battles, fx.DUMP_55K).height == fx.ROWS[fx.DUMP_55K]


def test_model_identity_across_dumps_goes_through_the_alias_table(combined):
    _, con, _ = combined
    names = dict(con.execute("SELECT DISTINCT model_a, model_a_canonical FROM s.battles UNION "
                             "SELECT DISTINCT model_b, model_b_canonical FROM s.battles").fetchall())
    assert names["gpt-4"] == names["gpt-4-0314"] == "gpt-4-0314"
    assert names["claude-v1"] == names["claude-1"] == "claude-1"


@pytest.mark.slow
def test_missing_fields_are_null_and_unavailable_per_dump(combined):
    _, con, _ = combined
    battles = con.execute("SELECT * FROM s.battles").pl()
    gaps = unavailable_columns(battles)
    assert fx.DUMP_140K not in gaps
    assert set(gaps[fx.DUMP_100K]) == set(ARENA_100K.unavailable)
    assert set(gaps[fx.DUMP_33K]) == set(CHATBOT_ARENA_33K.unavailable)
    assert set(gaps[fx.DUMP_55K]) == set(KAGGLE_55K.unavailable)
    # the suites pass when each dump is checked on the columns it has ...
    report = validate_dumps(battles, "battles", gaps)
    assert report.passed_errors, report.failures("error")
    assert report.results.height == validate_frame(battles.head(0), "battles").results.height
    # ... and would fail if the nulls were checked everywhere (never silently accepted)
    failed = set(validate_frame(battles, "battles").failures("error")["expectation_id"])
    assert {"is_code.not_null", "sum_user_tokens.not_null", "math.not_null"} <= failed


def test_votes_cast_with_the_names_shown_are_quarantined(combined):
    _, con, _ = combined
    rows = con.execute("SELECT dump, source_row, detail FROM s.quarantine WHERE rule = 'not_anonymous' "
                       "ORDER BY dump, source_row").fetchall()
    assert [(d, r) for d, r, _ in rows] == [(fx.DUMP_100K, r) for r in (9, 19, 29, 39)] + \
        [(fx.DUMP_33K, r) for r in (9, 19, 29)]
    assert rows[0][2].startswith("anony is false")
    ids = {r[0] for r in con.execute("SELECT id FROM s.quarantine WHERE rule = 'not_anonymous'").fetchall()}
    assert not ids & {r[0] for r in con.execute("SELECT id FROM s.battles").fetchall()}
    assert con.execute("SELECT count(*) FROM s.messages WHERE battle_id IN "
                       "(SELECT id FROM s.quarantine WHERE rule = 'not_anonymous')").fetchone() == (0,)


def test_a_null_in_a_field_the_format_has_is_still_quarantined(tmp_path):
    t100 = fx.make_100k(n=5)
    rows = t100.to_pylist()
    rows[2]["is_code"] = None  # the 100k card has is_code: a null there is a broken row
    pq.write_table(pa.Table.from_pylist(rows, schema=t100.schema), tmp_path / "x.parquet")
    t33 = fx.make_33k(n=5)  # the 33k card has no is_code: its nulls are expected
    pq.write_table(t33, tmp_path / "y.parquet")
    manifest = combine([("a/100k", local_manifest(parse_source(str(tmp_path / "x.parquet")))),
                        ("b/33k", local_manifest(parse_source(str(tmp_path / "y.parquet"))))])
    con = duckdb.connect()
    con.execute("CREATE SCHEMA s")
    report = load_dump(manifest, con, "s")
    assert report.per_dump["a/100k"]["battles"] == 4 and report.per_dump["b/33k"]["battles"] == 5
    rule, detail = con.execute("SELECT rule, detail FROM s.quarantine").fetchone()
    assert rule == "null_required" and detail == "null in required columns: is_code"


def test_combined_revision_tracks_each_dump():
    base = {"a/x": "1" * 40, "b/y": "2" * 40}
    # the load order is part of it: it decides which copy of a shared vote is kept
    assert combined_revision(base) != combined_revision(dict(reversed(list(base.items()))))
    assert combined_revision({**base, "b/y": "3" * 40}) != combined_revision(base)
    assert combined_revision({**base, "c/z": "4" * 40}) != combined_revision(base)
    assert combined_revision(base).startswith("dumps-")


def test_categories_are_unavailable_for_dumps_that_lack_their_fields(combined):
    from arena_pipeline.core.dataset.categories import tag_categories

    _, con, _ = combined
    battles = con.execute("SELECT * FROM s.battles").pl()
    tags, meta = tag_categories(battles)
    assert meta["coding"]["unavailable_in"] == sorted([fx.DUMP_33K, fx.DUMP_55K])
    assert meta["coding"]["null_as_false"] == 0  # their nulls are "unavailable", not "false"
    assert meta["creative_writing"]["unavailable_in"] == sorted([fx.DUMP_100K, fx.DUMP_33K, fx.DUMP_55K])
    assert meta["overall"]["unavailable_in"] == []
    coding = tags.filter(pl.col("category") == "coding").join(battles, left_on="battle_id", right_on="id")
    assert set(coding["dump"]) <= {fx.DUMP_140K, fx.DUMP_100K}
    assert tags.filter(pl.col("category") == "overall").height == battles.height
    # a dump alone whose format lacks the field: the category is unavailable, not an empty board
    only_33k = battles.filter(pl.col("dump") == fx.DUMP_33K)
    tags_33k, meta_33k = tag_categories(only_33k)
    assert meta_33k["coding"]["available"] is False and meta_33k["coding"]["battles"] is None
    assert meta_33k["multi_turn"]["available"] is True  # turns comes from the 33k's 'turn'
    assert "coding" not in set(tags_33k["category"])


def test_per_dump_boards_are_each_dumps_own_fit(combined):
    from arena_pipeline.core.dataset.categories import tag_categories
    from arena_pipeline.core.ranking import RankingConfig, compute_rankings, per_dump_leaderboards
    from arena_pipeline.core.ranking.tags import tag_rows

    _, con, _ = combined
    battles = con.execute("SELECT * FROM s.battles").pl().with_columns(
        model_a=pl.col("model_a_canonical"), model_b=pl.col("model_b_canonical"))
    tags, _ = tag_categories(battles)
    config = RankingConfig(min_battles=1, bootstrap_rounds=3)
    rows = tag_rows(battles.get_column("id"), [tags])
    combined_board = compute_rankings(battles, rows, config).leaderboard
    boards, seconds = per_dump_leaderboards(battles, rows, config, combined_board)
    assert set(seconds) == set(boards["dump"]) == set(battles["dump"])
    # the 33k's board: an independent fit on its own votes (its 33 and the 3 it shares), no bt_style
    own = dump_battles(battles, fx.DUMP_33K)
    own_tags = tags.join(own.select(battle_id="id"), on="battle_id", how="semi")
    expected = compute_rankings(own, tag_rows(own.get_column("id"), [own_tags]), config).leaderboard
    expected = expected.filter(pl.col("method") != "bt_style")
    got = boards.filter(pl.col("dump") == fx.DUMP_33K).drop("dump")
    key = ["category", "method", "model"]
    assert got.sort(key).select(key, "rating", "n_battles").equals(expected.sort(key).select(key, "rating", "n_battles"))
    assert "bt_style" in set(boards.filter(pl.col("dump") == fx.DUMP_140K)["method"])
    # one dump: its board is the combined one, not fitted again
    one = battles.filter(pl.col("dump") == fx.DUMP_140K)
    single, timing = per_dump_leaderboards(one, tag_rows(one.get_column("id"), [tags]), config, combined_board)
    assert single.drop("dump").equals(combined_board) and timing == {fx.DUMP_140K: 0.0}
