"""Every bad value is one quarantined vote in every dump format; a wrong column type, or a folder of two
formats, is one line; a vote two dumps hold with other content is a conflicting copy (issue 25, items 2, 4)."""

from __future__ import annotations

import io
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.core.dataset.adapters import KAGGLE_55K, choose_adapter
from arena_pipeline.core.dataset.categories import tag_categories
from arena_pipeline.core.dataset.dumps import board_dumps, conflicting_copies
from arena_pipeline.core.dataset.manifest import combine
from arena_pipeline.core.dataset.quarantine import CONFLICT_RULE, CROSS_DUMP_RULE
from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest.load import load_dump
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.sources import SourceError, parse_source
from arena_pipeline.core.ranking import RankingConfig, compute_rankings, per_dump_leaderboards
from arena_pipeline.core.ranking.tags import tag_rows
from arena_pipeline_dev import dump_fixtures as fx
from arena_pipeline_dev.fixtures import make_table
from arena_pipeline_tests.support import bad_inputs as bi

ROWS = 6
TABLES = {"33k": lambda: fx.make_33k(n=ROWS), "100k": lambda: fx.make_100k(n=ROWS),
          "140k": lambda: make_table(ROWS, seed=3)}
ID_COLUMN = {"33k": "question_id", "100k": "question_id", "140k": "id"}


def _load(source: Path) -> tuple[ingest.LoadReport, list[tuple], set[str]]:
    """Load one local dump: the report, the quarantine rows (id, rule, detail) and the battle ids."""
    with duckdb.connect() as con:
        report = load_dump(local_manifest(parse_source(str(source))), con, "v")
        quarantined = con.execute("SELECT id, rule, detail FROM v.quarantine ORDER BY source_row").fetchall()
        ids = {r[0] for r in con.execute("SELECT id FROM v.battles").fetchall()}
    return report, quarantined, ids


@pytest.mark.parametrize("bad", bi.bad_values(), ids=lambda b: f"{b.format} {b.case}")
def test_a_bad_value_is_one_quarantined_vote(bad, tmp_path):
    """Each value used to stop flat_tables with a raw Polars/Arrow error (the dump failed whole)."""
    table = bad.build(TABLES[bad.format]())
    bi.write_shards(tmp_path / "dump", [table])
    report, quarantined, ids = _load(tmp_path / "dump")
    all_ids = table.column(ID_COLUMN[bad.format]).to_pylist()
    assert (report.rows_read, report.battles, report.quarantined) == (ROWS, ROWS - 1, 1)
    assert quarantined == [(all_ids[bi.BAD_ROW], bad.rule, bad.detail)]
    assert ids == set(all_ids) - {all_ids[bi.BAD_ROW]}


def _csv_55k(cells: list[tuple[str, str, str]]) -> bytes:
    lines = [",".join(fx.COLUMNS_55K)]
    for i, (a, b, tie) in enumerate(cells):
        lines.append(f'{i},m1,m2,"[""q{i}""]","[""a""]","[""b""]",{a},{b},{tie}')
    return ("\n".join(lines) + "\n").encode()


def test_55k_winner_cells_are_read_as_numbers(tmp_path, golden):
    """A one-hot cell "1.0" used to be read as no flag at all (the vote quarantined as unknown_winner)."""
    path = tmp_path / "train.csv"
    path.write_bytes(_csv_55k([("1.0", "0.0", "0.0"), (" 1 ", "0", "0"), ("0", "1.00", "0"), ("0.0", "0.0", "1e0"),
                               ("1.5", "0", "0"), ("true", "0", "0")]))
    report, quarantined, _ = _load(path)
    with duckdb.connect() as con:
        load_dump(local_manifest(parse_source(str(path))), con, "v")
        winners = dict(con.execute("SELECT id, winner FROM v.battles").fetchall())
    assert winners == {"0": "model_a", "1": "model_a", "2": "model_b", "3": "tie"}
    # not one-hot: quarantined, the cells spelled as given
    assert [(battle, rule) for battle, rule, _ in quarantined] == [("4", "unknown_winner"), ("5", "unknown_winner")]
    golden.check("quarantine", "one-hot winners that are not: details", "\n".join(d for *_, d in quarantined))
    assert report.rows_read == 6


def test_55k_as_parquet_with_float_winner_columns(tmp_path):
    frame = pl.read_csv(io.BytesIO(_csv_55k([("1", "0", "0"), ("0", "0", "1")])), infer_schema=False)
    frame = frame.with_columns(pl.col("winner_model_a", "winner_model_b", "winner_tie").cast(pl.Float64),
                               pl.col("id").cast(pl.Int64))
    assert choose_adapter(frame.to_arrow().schema) is KAGGLE_55K
    frame.write_parquet(tmp_path / "train.parquet")
    report, quarantined, ids = _load(tmp_path / "train.parquet")
    assert (report.battles, quarantined, ids) == (2, [], {"0", "1"})


def _retyped(table: pa.Table, column: str, dtype: pa.DataType) -> pa.Table:
    values = pa.nulls(table.num_rows, dtype) if dtype == pa.null() else table.column(column).cast(dtype)
    return table.set_column(table.schema.get_field_index(column), column, values)


@pytest.mark.parametrize(("fmt", "column", "dtype", "message"), [
    ("33k", "conversation_a", pa.null(), "wrong column type for the chatbot-arena-33k format "
     "(lmsys/chatbot_arena_conversations): conversation_a is null, expected list"),
    ("100k", "conv_metadata", pa.null(), "wrong column type for the arena-100k format "
     "(lmarena-ai/arena-human-preference-100k): conv_metadata is null, expected struct"),
    ("100k", "tstamp", pa.string(), "wrong column type for the arena-100k format "
     "(lmarena-ai/arena-human-preference-100k): tstamp is string, expected float or integer"),
    ("140k", "conversation_a", pa.null(), "does not match the dataset card schema: wrong type for conversation_a: "
     "expected list<item: struct<role: string"),
    ("140k", "category_tag", pa.null(), "does not match the dataset card schema: wrong type for category_tag: "
     "expected struct<"),
    ("55k", "prompt", pa.int64(), "wrong column type for the arena-55k format "
     "(lmarena-ai/arena-human-preference-55k): prompt is int64, expected string"),
])
def test_a_column_of_the_wrong_type_family_is_one_line(fmt, column, dtype, message, tmp_path):
    """A null-typed list or struct column used to pass the format check and fail later inside Polars."""
    if fmt == "55k":
        table = pl.read_csv(io.BytesIO(_csv_55k([("1", "0", "0")])), infer_schema=False).with_columns(
            pl.lit(7, pl.Int64).alias("prompt")).to_arrow()
    else:
        table = _retyped(TABLES[fmt](), column, dtype)
    path = tmp_path / "dump" / "part.parquet"
    path.parent.mkdir()
    pq.write_table(table, path)
    with pytest.raises(SourceError) as error:
        local_manifest(parse_source(str(tmp_path / "dump")))
    text = str(error.value)
    assert "\n" not in text and text.startswith(f"{path}: ") and message in text, text


def test_a_folder_mixing_formats_is_refused_before_hashing(tmp_path, monkeypatch, golden):
    """It used to load and then fail the creative_writing.not_null check (the 100k has no such tag)."""
    folder = tmp_path / "dump"
    bi.write_shards(folder, [make_table(4, seed=1), make_table(4, seed=2)])
    pq.write_table(fx.make_100k(n=4), folder / "data" / "train-00002-of-00002.parquet")

    def no_hashing(path):
        raise AssertionError(f"{path} was hashed before the formats were checked")

    monkeypatch.setattr(ingest, "file_sha256", no_hashing)
    with pytest.raises(SourceError) as error:
        local_manifest(parse_source(str(folder)))
    golden.check("load", "a folder of two formats", str(error.value))


# ---------------------------------------------------------------------------
# Item 2: one vote id in two dumps with other content
# ---------------------------------------------------------------------------

A, B, C = "org/a", "org/b", "org/c"


@pytest.fixture(scope="module")
def conflicting(tmp_path_factory):
    root = tmp_path_factory.mktemp("conflicting")
    a, b = bi.conflicting_dumps(root, (A, B, C))
    manifest = combine([(name, local_manifest(parse_source(str(root / name)))) for name in (A, B, C)])
    con = duckdb.connect()
    con.execute("CREATE SCHEMA s")
    report = load_dump(manifest, con, "s")
    yield a, b, root, con, report
    con.close()


def test_conflicting_copies_are_their_own_rule(conflicting, golden):
    """They used to be duplicate_across_dumps, with nothing said about the conflict."""
    a, b, _, con, report = conflicting
    rows = con.execute("SELECT dump, source_row, rule, detail FROM s.quarantine WHERE dump = ? ORDER BY source_row",
                       [B]).fetchall()
    assert [(r[1], r[2]) for r in rows] == [(0, CROSS_DUMP_RULE), (1, CROSS_DUMP_RULE), (2, CROSS_DUMP_RULE),
                                            (3, CROSS_DUMP_RULE), (4, CONFLICT_RULE), (5, CONFLICT_RULE),
                                            (6, CONFLICT_RULE), (7, f"unknown_winner,{CONFLICT_RULE}")]
    detail = rows[4][3]
    golden.check("quarantine", "a conflicting copy: detail", detail)
    assert all(str(value) in detail for value in (a[4]["id"], a[4]["model_a"], b[4]["model_a"], b[4]["winner"]))
    golden.check("quarantine", "a conflicting copy with a broken winner: detail", rows[7][3])
    # C's copies agree with A's: deduplicated as before
    assert {r for (r,) in con.execute("SELECT DISTINCT rule FROM s.quarantine WHERE dump = ?", [C]).fetchall()} == {
        CROSS_DUMP_RULE}
    assert report.quarantine_by_rule == {"unknown_winner": 1, CROSS_DUMP_RULE: 4 + 6, CONFLICT_RULE: 4}
    assert report.per_dump[B]["conflicting_duplicates"] == 4 and report.per_dump[B]["kept_in_another_dump"] == 4
    # the combined tables keep A's copy of every shared vote; A's rows list only the dumps that agree
    kept = dict(con.execute("SELECT source_row, also_in_dumps FROM s.battles WHERE dump = ?", [A]).fetchall())
    assert kept == {0: f"{B},{C}", 1: f"{B},{C}", 2: f"{B},{C}", 3: f"{B},{C}", 4: C, 5: C, 6: None, 7: None,
                    8: None, 9: None, 10: None, 11: None}
    assert dict(con.execute("SELECT dump, count(*) FROM s.battles GROUP BY 1").fetchall()) == {A: 12, B: 2}


def test_per_dump_boards_fit_each_dumps_own_votes(conflicting):
    """B's board used to leave out its conflicting copies (and C, every vote of which A holds, had none)."""
    _, _, root, con, _ = conflicting
    canonical = {"model_a": pl.col("model_a_canonical"), "model_b": pl.col("model_b_canonical")}
    battles = con.execute("SELECT * FROM s.battles").pl().with_columns(**canonical)
    copies = conflicting_copies(con.execute("SELECT * FROM s.quarantine").pl()).with_columns(**canonical)
    assert sorted(copies["source_row"]) == [4, 5, 6] and set(copies["dump"]) == {B}
    assert board_dumps(battles, copies) == [A, B, C]
    tags = tag_rows(battles.get_column("id"), [tag_categories(battles)[0]])
    config = RankingConfig(min_battles=1, bootstrap_rounds=3)
    combined = compute_rankings(battles, tags, config).leaderboard
    boards, seconds = per_dump_leaderboards(battles, tags, config, combined, copies)
    assert set(seconds) == set(boards["dump"]) == {A, B, C}
    key = ["category", "method", "model"]
    for dump in (B, C):  # each dump's board is the board of that dump loaded alone (side order aside)
        with duckdb.connect() as alone:
            load_dump(local_manifest(parse_source(str(root / dump))), alone, "v")
            own = alone.execute("SELECT * FROM v.battles").pl().with_columns(**canonical)
        own_tags = tag_rows(own.get_column("id"), [tag_categories(own)[0]])
        expected = compute_rankings(own, own_tags, config).leaderboard.filter(pl.col("method") == "bt")
        got = boards.filter((pl.col("dump") == dump) & (pl.col("method") == "bt")).sort(key)
        expected = expected.sort(key)
        assert got.select(key, "n_battles").equals(expected.select(key, "n_battles")), dump
        assert got["rating"].to_list() == pytest.approx(expected["rating"].to_list(), abs=1e-6)


# ---------------------------------------------------------------------------
# Issue 38, item 1: text that is not UTF-8 is one quarantined vote, in either reader
# ---------------------------------------------------------------------------

#: Seven bytes that are not UTF-8, written over a seven-character placeholder in an uncompressed file.
PLACEHOLDER, NOT_UTF8 = b"@@BAD@@", b"gp\xff\xfe\xfd\xfc!"

#: Loads a dump in a child process: on 49b278d the first string operation on such a value read out of
#: bounds (a segfault), which must fail the test, not end pytest. Prints the outcome as JSON.
_LOAD = """
import json, sys
import duckdb
from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.sources import parse_source
source, reader, batch_rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
if reader == "pyarrow":
    ingest.POLARS_ROW_GROUP_BYTES = -1
ingest.BATCH_ROWS = batch_rows
with duckdb.connect() as con:
    report = ingest.load_dump(local_manifest(parse_source(source)), con, "v")
    rows = con.execute("SELECT id, source_row, rule, detail FROM v.quarantine ORDER BY source_row").fetchall()
    ids = sorted(r[0] for r in con.execute("SELECT id FROM v.battles").fetchall())
print(json.dumps({"read": report.rows_read, "quarantine": [list(r) for r in rows], "ids": ids}))
"""


def _load_in_child(source: Path, reader: str = "polars", batch_rows: int = ingest.BATCH_ROWS) -> dict:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _LOAD, str(source), reader, str(batch_rows)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the load ended with {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _with_placeholder(table: pa.Table, path: tuple, row: int) -> pa.Table:
    return bi.set_value(table, path, PLACEHOLDER.decode(), row=row)


def _write_not_utf8(table: pa.Table, path: Path, row_group_size: int | None = None) -> None:
    """``table`` written plain (no compression, no dictionary), the placeholder's bytes then replaced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="NONE", use_dictionary=False, write_statistics=False,
                   row_group_size=row_group_size)
    data = path.read_bytes()
    assert data.count(PLACEHOLDER) == 1
    path.write_bytes(data.replace(PLACEHOLDER, NOT_UTF8))


def _55k_table() -> pa.Table:
    cells = [("1", "0", "0"), ("0", "1", "0"), ("0", "0", "1"), ("1", "0", "0")]
    return pl.read_csv(io.BytesIO(_csv_55k(cells)), infer_schema=False).to_arrow()


#: (format, reader, column path of the bad text, the column the detail names, row, row group size, batch rows)
NOT_UTF8_CASES = [
    ("33k", "pyarrow", ("model_a",), "model_a", 1, None, 4096),
    ("100k", "pyarrow", ("model_a",), "model_a", 1, None, 4096),
    ("100k", "pyarrow", ("conversation_b", 0, "content"), "conversation_b[].content", 2, None, 4096),
    ("55k", "pyarrow", ("model_b",), "model_b", 1, None, 4096),
    ("140k", "polars", ("model_a",), "model_a", 1, None, 4096),
    ("140k", "pyarrow", ("model_a",), "model_a", 1, None, 4096),
    ("140k", "pyarrow", ("conversation_a", 0, "content", 0, "text"), "conversation_a[].content[].text", 4, None,
     4096),
    # Polars refuses the file in its third row group, after batches of the first ones were loaded:
    # pyarrow reads on from the row where it stopped
    ("140k", "polars", ("conversation_a", 0, "content", 0, "text"), "conversation_a[].content[].text", 11, 5, 4),
    ("140k", "polars", ("id",), "id", 7, 3, 2),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "reader", "path", "column", "row", "group", "batch"), NOT_UTF8_CASES,
                         ids=[f"{c[0]} {c[1]} {c[3]} row {c[4]}" for c in NOT_UTF8_CASES])
def test_text_that_is_not_utf8_is_one_quarantined_vote(fmt, reader, path, column, row, group, batch, tmp_path):
    """A string that is not UTF-8 segfaulted the process when pyarrow read it (every older format, and the
    140k's row groups over 256 MB), and failed the whole dump naming neither file nor vote on the Polars
    path (issue 38, item 1). Now: the vote is quarantined as invalid_utf8, the detail naming the column."""
    table = {"55k": _55k_table, "140k": lambda: make_table(14, seed=3)}.get(fmt, TABLES.get(fmt))()
    id_column = {"55k": "id"}.get(fmt, ID_COLUMN.get(fmt))
    ids = [str(i) for i in table.column(id_column).to_pylist()]
    table = _with_placeholder(table, path, row)
    source = tmp_path / "dump" / bi.shard_name(0, 1)
    _write_not_utf8(table, source, group)
    out = _load_in_child(tmp_path / "dump", reader, batch)
    shown = NOT_UTF8.decode("latin-1").encode("latin-1")
    expected_id = None if column == "id" else ids[row]
    assert out["read"] == len(ids)
    assert out["quarantine"] == [[expected_id, row, "invalid_utf8", f"{column} is not valid UTF-8: {shown!r}"]]
    assert out["ids"] == sorted(set(ids) - {ids[row]})


# ---------------------------------------------------------------------------
# Issue 38, item 5: dictionary-encoded columns; a read error names the file and the row group
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(("fmt", "reader"), [("33k", "pyarrow"), ("100k", "pyarrow"), ("140k", "polars"),
                                             ("140k", "pyarrow")])
def test_dictionary_encoded_columns_are_decoded(fmt, reader, tmp_path, monkeypatch):
    """A dictionary-encoded string column (a writer's choice of encoding) failed the format check."""
    table = TABLES[fmt]()
    for name in ("model_a", "winner"):
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, table.column(name).dictionary_encode())
    bi.write_shards(tmp_path / "dump", [table])
    if reader == "pyarrow":
        monkeypatch.setattr(ingest, "POLARS_ROW_GROUP_BYTES", -1)
    report, quarantined, _ = _load(tmp_path / "dump")
    with duckdb.connect() as con:
        load_dump(local_manifest(parse_source(str(tmp_path / "dump"))), con, "v")
        models = con.execute("SELECT model_a FROM v.battles ORDER BY source_row").fetchall()
    expected = [m for m, anony in zip(table.column("model_a").to_pylist(), table.column("anony").to_pylist()
                                      if "anony" in table.column_names else [True] * ROWS, strict=True) if anony]
    assert report.rows_read == ROWS and [m for (m,) in models] == expected
    assert all(rule == "not_anonymous" for _, rule, _ in quarantined)


@pytest.mark.parametrize("reader", ["polars", "pyarrow"])
def test_a_corrupt_row_group_names_the_file_and_the_row_group(reader, tmp_path, monkeypatch, golden):
    """A damaged page in the middle of a shard failed with "Invalid thrift: bad data", naming no file."""
    path = tmp_path / "dump" / bi.shard_name(0, 1)
    path.parent.mkdir(parents=True)
    pq.write_table(make_table(30, seed=3), path, row_group_size=10)
    column = pq.ParquetFile(path).metadata.row_group(1).column(0)
    start = column.dictionary_page_offset or column.data_page_offset
    data = bytearray(path.read_bytes())
    data[start:start + 16] = b"\xff" * 16  # the page header of row group 1's first column
    path.write_bytes(bytes(data))
    if reader == "pyarrow":
        monkeypatch.setattr(ingest, "POLARS_ROW_GROUP_BYTES", -1)
    with pytest.raises(SourceError) as error:
        _load(tmp_path / "dump")
    text = str(error.value)
    assert "\n" not in text
    assert "thrift" in text  # the reader's own reason (its words vary with the reader): between the parentheses
    golden.check("load", "a corrupt row group", text.partition(" is not readable (")[0] + " ... " + text.rpartition("); ")[2])
