"""Locating, verifying and parsing the files of a dump."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arena_pipeline.core.dataset.schema import DATASET_ARROW_SCHEMA
from arena_pipeline.core.ingest.sources import (
    DEFAULT_MAX_CELL_BYTES,
    MAX_CELL_SYNTAX_CHARS,
    SourceError,
    compare_schema,
    csv_row_count,
    hub_not_found_note,
    iso_timestamp_expr,
    local_shards,
    parse_source,
    read_csv_export,
    verify_shard,
)
from arena_pipeline_dev.fixtures import make_table, write_dump

REAL_CSV = Path(__file__).parents[2] / "data" / "arena_human_preference_sample_100.csv"


def test_parse_source_kinds(tmp_path):
    write_dump(tmp_path / "dump", 4, 1)
    assert parse_source(str(tmp_path / "dump")).kind == "parquet_dir"
    assert parse_source(str(tmp_path / "dump" / "data" / "train-00000-of-00001.parquet")).kind == "parquet_file"
    assert parse_source(str(REAL_CSV)).kind == "csv"
    hub = parse_source("lmarena-ai/arena-human-preference-140k")
    assert (hub.kind, hub.location) == ("hub", "lmarena-ai/arena-human-preference-140k")
    with pytest.raises(SourceError, match="no such local path"):
        parse_source(str(tmp_path / "missing" / "deeper"))


@pytest.mark.parametrize("source", [
    "data/mydump",        # its first component exists here: a relative path, not a Hub id
    "data/mydump/",       # a trailing separator
    "./mydump", "~/no-such-arena-dump", "mydump.parquet", "exports/votes.csv", "a/b/c", "dump",
    "data\\mydump",
])
def test_a_missing_path_is_not_taken_for_a_hub_id(tmp_path, monkeypatch, source):
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SourceError, match="no such local path") as err:
        parse_source(source)
    assert "hf://datasets/<org>/<name>" in str(err.value)  # how to name the Hub instead


def test_hub_ids_bare_and_explicit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bare = parse_source("org/name.v0.1")
    assert (bare.kind, bare.location, bare.revision, bare.explicit) == ("hub", "org/name.v0.1", None, False)
    assert "no local path of that name exists" in hub_not_found_note(bare)
    explicit = parse_source("hf://datasets/lmarena-ai/arena-human-preference-140k@v1.0")
    assert (explicit.kind, explicit.location, explicit.revision, explicit.explicit) == (
        "hub", "lmarena-ai/arena-human-preference-140k", "v1.0", True)
    assert parse_source("hf://datasets/org/name").revision is None
    assert hub_not_found_note(explicit) == ""
    (tmp_path / "data").mkdir()  # an explicit Hub id is never a local path
    assert parse_source("hf://datasets/data/mydump").kind == "hub"
    for bad in ("hf://models/org/name", "hf://datasets/org", "hf://datasets/org/name@", "hf://datasets/../x"):
        with pytest.raises(SourceError, match="hf://datasets/<org>/<name>@<revision>"):
            parse_source(bad)


def test_local_shards_prefer_hub_layout(tmp_path):
    paths = write_dump(tmp_path, 6, 3)
    pq.write_table(make_table(1), tmp_path / "other.parquet")
    assert local_shards(tmp_path) == paths
    loose = tmp_path / "loose"
    loose.mkdir()
    pq.write_table(make_table(1), loose / "b.parquet")
    pq.write_table(make_table(1), loose / "a.parquet")
    assert [p.name for p in local_shards(loose)] == ["a.parquet", "b.parquet"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SourceError, match="no parquet files"):
        local_shards(empty)


def test_verify_shard_accepts_card_schema_and_counts_rows(tmp_path):
    (path,) = write_dump(tmp_path, 7, 1)
    assert verify_shard(path) == 7


def test_verify_shard_rejects_non_parquet_and_truncated(tmp_path, golden):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(SourceError) as raised:
        verify_shard(bad)
    golden.check("load", "not a parquet file", str(raised.value).partition(" (")[0])  # then pyarrow's words
    (good,) = write_dump(tmp_path / "d", 5, 1)
    truncated = tmp_path / "trunc.parquet"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(SourceError) as raised:
        verify_shard(truncated)
    assert str(raised.value).startswith(f"{truncated}: ")  # the same refusal (pyarrow's words after it vary)


def test_verify_shard_names_missing_column_and_wrong_type(tmp_path, golden):
    table = make_table(3)
    missing = tmp_path / "missing.parquet"
    pq.write_table(table.drop_columns(["winner"]), missing)
    with pytest.raises(SourceError) as raised:
        verify_shard(missing)
    golden.check("load", "a parquet file without a column", str(raised.value))
    retyped = tmp_path / "retyped.parquet"
    pq.write_table(table.set_column(5, "evaluation_order", pa.array(["1"] * 3)), retyped)
    with pytest.raises(SourceError) as raised:
        verify_shard(retyped)
    golden.check("load", "a parquet column of another type", str(raised.value))


def test_compare_schema_reports_new_optional_fields_without_failing():
    fields = list(DATASET_ARROW_SCHEMA)
    tag = DATASET_ARROW_SCHEMA.field("category_tag").type
    new_tag = pa.struct(list(tag) + [pa.field("criteria_v0.2", pa.struct([("x", pa.bool_())]))])
    idx = DATASET_ARROW_SCHEMA.get_field_index("category_tag")
    fields[idx] = pa.field("category_tag", new_tag)
    schema = pa.schema(fields + [pa.field("new_column", pa.string())])
    diff = compare_schema(schema)
    assert not diff.fatal
    assert diff.extra == ["category_tag.criteria_v0.2 (struct<x: bool>)", "new_column (string)"]


def test_compare_schema_integer_widths_and_timestamp_units_are_compatible():
    fields = [
        pa.field(f.name, pa.int64()) if f.name == "evaluation_order"
        else pa.field(f.name, pa.timestamp("us")) if f.name == "timestamp" else f
        for f in DATASET_ARROW_SCHEMA
    ]
    assert not compare_schema(pa.schema(fields)).fatal


def test_read_real_csv_export():
    parsed = read_csv_export(REAL_CSV)
    assert parsed.table.num_rows == 100
    assert parsed.table.schema.equals(DATASET_ARROW_SCHEMA)
    winners = parsed.table.column("winner").to_pylist()
    assert (winners.count("model_a"), winners.count("model_b"), winners.count("tie"),
            winners.count("both_bad")) == (38, 33, 19, 10)


def test_csv_literal_that_calls_code_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    text = REAL_CSV.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    cols = rows[0]
    evil = f"__import__('os').system('touch {marker}')"
    rows[1][cols.index("conv_metadata")] = evil
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    path = tmp_path / "evil.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    parsed = read_csv_export(path)
    assert not marker.exists()
    assert parsed.table.num_rows == 99
    q = parsed.quarantine.row(0, named=True)
    assert q["rule"] == "unparseable_nested_field" and q["source_row"] == 0
    assert q["id"] == rows[1][cols.index("id")]
    assert q["detail"].startswith("conv_metadata: ValueError")


def test_csv_not_utf8_names_file_and_byte(tmp_path, golden):
    path = tmp_path / "latin1.csv"
    path.write_bytes(REAL_CSV.read_bytes()[:500] + b"\xff\xfe" + REAL_CSV.read_bytes()[500:])
    with pytest.raises(SourceError) as raised:
        read_csv_export(path)
    golden.check("load", "a CSV export not in UTF-8", str(raised.value))


def test_csv_missing_column_is_fatal(tmp_path):
    path = tmp_path / "few.csv"
    path.write_text("id,model_a\nx,y\n", encoding="utf-8")
    with pytest.raises(SourceError, match="few.csv: missing column"):
        read_csv_export(path)


def _csv_with(tmp_path: Path, column: str, values: dict[int, str], name: str = "edited.csv") -> tuple[Path, list]:
    """The real sample with ``values[row]`` written into ``column`` of those data rows."""
    rows = list(csv.reader(io.StringIO(REAL_CSV.read_text(encoding="utf-8"))))
    index = rows[0].index(column)
    for row, value in values.items():
        rows[row + 1][index] = value
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    path = tmp_path / name
    path.write_text(out.getvalue(), encoding="utf-8")
    return path, rows


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2025-05-29T14:48:41+05:30", dt.datetime(2025, 5, 29, 9, 18, 41)),
        ("2025-05-29T14:48:41.5-02:00", dt.datetime(2025, 5, 29, 16, 48, 41, 500000)),
        ("2025-05-29 14:48:41Z", dt.datetime(2025, 5, 29, 14, 48, 41)),
        ("2025-05-29T14:48:41+0530", dt.datetime(2025, 5, 29, 9, 18, 41)),
        ("2025-07-01T23:30:00+05", dt.datetime(2025, 7, 1, 18, 30)),  # ISO 8601's hours-only offset
        ("2025-07-01T23:30-03", dt.datetime(2025, 7, 2, 2, 30)),
        ("2025-05-29T14:48:41", dt.datetime(2025, 5, 29, 14, 48, 41)),
        ("2025-05-29T14:48:41.602925", dt.datetime(2025, 5, 29, 14, 48, 41, 602925)),
        ("2025-05-29", dt.datetime(2025, 5, 29)),
        ("29/05/2025 14:48", None),
        ("2025-13-01T00:00:00", None),
    ],
)
def test_iso_timestamps_with_or_without_offset_parse_to_utc(text, utc):
    out = pl.DataFrame({"t": [text]}).select(iso_timestamp_expr("t")).to_series()
    assert out.dtype == pl.Datetime("ns")
    assert out.to_list() == [utc]


def test_csv_mixed_timestamp_formats_are_parsed_per_value(tmp_path):
    # the first row decided the format before: an offset there quarantined every plain row
    path, rows = _csv_with(tmp_path, "timestamp", {0: "2025-05-29T14:48:41+05:30", 1: "2025-07-07 02:04:51Z",
                                                   2: "not a time"})
    parsed = read_csv_export(path)
    assert parsed.table.num_rows == 99
    assert parsed.quarantine["source_row"].to_list() == [2]
    times = parsed.table.column("timestamp").to_pylist()
    assert times[0] == dt.datetime(2025, 5, 29, 9, 18, 41)
    assert times[1] == dt.datetime(2025, 7, 7, 2, 4, 51)
    index = rows[0].index("timestamp")
    assert times[2] == dt.datetime.fromisoformat(rows[4][index])  # untouched rows keep their value


def test_unreadable_scalar_cells_are_quarantined_naming_column_and_cell(tmp_path, golden):
    """evaluation_order, is_code and timestamp cells that do not read as what they are: rule
    unparseable_field (not a nested field), the column and the cell in the detail, every cell in raw."""
    path, rows = _csv_with(tmp_path, "timestamp", {3: "yesterday"})  # rows[0] is the header: data row i is rows[i + 1]
    header = rows[0]
    rows[5][header.index("is_code")] = "yes"
    rows[7][header.index("evaluation_order")] = "first"
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    quarantine = read_csv_export(path).quarantine.sort("source_row")
    assert quarantine.select("source_row", "rule").rows() == [(3, "unparseable_field"), (4, "unparseable_field"),
                                                              (6, "unparseable_field")]
    golden.check("load", "unreadable cells: quarantine details", "\n".join(quarantine.get_column("detail")))
    raw = json.loads(quarantine.get_column("raw")[0])
    assert raw["timestamp"] == "yesterday" and raw["conversation_a"] == rows[4][header.index("conversation_a")]


def test_oversized_cell_is_quarantined_without_parsing(tmp_path, golden):
    # 24 MB of one literal with millions of elements: parsing it took minutes and gigabytes
    huge = "[" + "0," * 12_000_000 + "]"
    path, rows = _csv_with(tmp_path, "conversation_a", {5: huge})
    started = time.perf_counter()
    parsed = read_csv_export(path)  # the default limit, 16 MiB
    assert time.perf_counter() - started < 20
    assert parsed.table.num_rows == 99
    q = parsed.quarantine.row(0, named=True)
    assert (q["rule"], q["source_row"]) == ("oversized_cell", 5)
    golden.check("load", "an oversized cell: quarantine detail", q["detail"],
                 {str(len(huge)): "<size>", str(DEFAULT_MAX_CELL_BYTES): "<limit>"})
    # raw keeps every other cell (the row's other conversations: about 14 kB) and the oversized one's size only
    assert json.loads(q["raw"])["conversation_a"] == f"<{len(huge)} bytes>" and len(q["raw"]) < 50_000


def test_cell_limit_applies_to_every_column_and_is_configurable(tmp_path):
    path, rows = _csv_with(tmp_path, "model_a", {7: "m" * 5000})
    parsed = read_csv_export(path, max_cell_bytes=50_000)
    sizes = [len(r[rows[0].index("full_conversation")].encode()) for r in rows[1:]]
    over = [i for i, n in enumerate(sizes) if n > 50_000]
    assert over  # the sample has full_conversation cells above 50 kB
    assert parsed.quarantine["source_row"].to_list() == over
    assert set(parsed.quarantine["rule"]) == {"oversized_cell"}
    tight = read_csv_export(path, max_cell_bytes=4096)
    row7 = tight.quarantine.filter(pl.col("source_row") == 7).row(0, named=True)
    assert "model_a: cell of 5000 bytes" in row7["detail"]
    assert '"model_a": "<5000 bytes>"' in row7["raw"]


def test_cell_of_tiny_elements_is_quarantined_by_its_syntax_count(tmp_path, golden):
    # small in bytes, but its syntax tree would cost ~1 kB per element (4 MiB of "0," took 2 GB)
    cell = "[" + "0," * (MAX_CELL_SYNTAX_CHARS + 1) + "]"
    path, _ = _csv_with(tmp_path, "full_conversation", {3: cell})
    parsed = read_csv_export(path)
    q = parsed.quarantine.row(0, named=True)
    assert (q["rule"], q["source_row"]) == ("oversized_cell", 3)
    golden.check("load", "a cell of too many elements: quarantine detail", q["detail"],
                 {str(MAX_CELL_SYNTAX_CHARS + 3): "<count>", str(MAX_CELL_SYNTAX_CHARS): "<limit>"})


def test_csv_row_count_counts_records_not_lines(tmp_path):
    assert csv_row_count(REAL_CSV) == 100
    multiline, _ = _csv_with(tmp_path, "language", {0: "en\nfr\nde", 5: "a\r\nb"})
    assert multiline.read_text(encoding="utf-8").count("\n") > 103  # quoted newlines inside cells
    assert csv_row_count(multiline) == 100
    header_only = tmp_path / "empty.csv"
    header_only.write_text(REAL_CSV.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    assert csv_row_count(header_only) == 0
