"""The load's part files: every table written once, as Parquet, a part file per batch; a failed load
leaves the folders to its caller; load_dump gives the same tables in one database."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.ingest import load as ingest
from arena_pipeline.core.ingest.local_dump import local_manifest
from arena_pipeline.core.ingest.sources import parse_source
from arena_pipeline_dev.fixtures import write_dump

TABLES = ("battles", "messages", "context_messages", "quarantine", "preference_pairs")


def _tables(con: duckdb.DuckDBPyConnection, schema: str) -> dict[str, int]:
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", [schema]).fetchall()]
    return {name: con.execute(f'SELECT count(*) FROM {schema}."{name}"').fetchone()[0] for name in names}


def test_a_load_writes_every_table_as_part_files_a_batch_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "BATCH_ROWS", 8)
    write_dump(tmp_path, n_rows=30, n_shards=3)
    manifest = local_manifest(parse_source(str(tmp_path / "data")))
    folders = {name: tmp_path / "out" / name for name in TABLES}
    report = ingest.fill_dump(manifest, folders)
    counts = {name: duckdb.sql(f"SELECT count(*) FROM {ingest.parts_scan(folders[name])}").fetchone()[0]
              for name in TABLES}
    assert counts == {"battles": report.battles, "messages": report.messages,
                      "context_messages": report.context_messages, "quarantine": report.quarantined,
                      "preference_pairs": report.pairs}
    assert report.battles == 30 and report.messages > 0 and report.pairs > 0
    # the messages: a part file per batch (3 shards of 10 rows, batches of 8: 6 batches); battles in one piece
    assert len(list(folders["messages"].glob(ingest.PART_GLOB))) == 6
    assert len(list(folders["battles"].glob(ingest.PART_GLOB))) == 1
    # a table without rows has one empty part file of its columns
    (empty,) = folders["quarantine"].glob(ingest.PART_GLOB)
    assert pl.read_parquet_schema(empty).keys() == ingest.load_tables()["quarantine"].keys()


def test_load_dump_fills_one_database_with_the_same_tables(tmp_path):
    write_dump(tmp_path, n_rows=30, n_shards=3)
    manifest = local_manifest(parse_source(str(tmp_path / "data")))
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        report = ingest.load_dump(manifest, con, "s")
        tables = _tables(con, "s")
        kinds = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_schema = 's' AND table_name = 'battles'").fetchall())
    assert tables == {"battles": report.battles, "messages": report.messages,
                      "context_messages": report.context_messages, "quarantine": report.quarantined,
                      "preference_pairs": report.pairs}
    assert kinds["timestamp"] == "TIMESTAMP" and kinds["turns"] == "INTEGER"


def test_a_load_that_fails_midway_swaps_nothing_in(tmp_path, monkeypatch):
    write_dump(tmp_path, n_rows=30, n_shards=3)
    manifest = local_manifest(parse_source(str(tmp_path / "data")))
    real = ingest._iter_file
    read = []

    def fail_in_the_third_file(shard, *args, **kwargs):
        read.append(shard.name)
        if len(read) == 3:  # two files' messages and pairs are written by then
            raise RuntimeError("disk gone")
        yield from real(shard, *args, **kwargs)

    monkeypatch.setattr(ingest, "_iter_file", fail_in_the_third_file)
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        with pytest.raises(RuntimeError, match="disk gone"):
            ingest.load_dump(manifest, con, "s")
        assert _tables(con, "s") == {}
