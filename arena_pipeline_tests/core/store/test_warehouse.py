"""core.warehouse: a damaged DuckDB file is reported at once, with the way to rebuild it (``connect``); a query's
rows streamed a batch at a time (``stream_frames``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb
import pytest

from arena_pipeline.core.store.warehouse import REBUILD_COMMAND, WarehouseCorruptError, connect, stream_frames


def _good(path: Path) -> int:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA arena; CREATE TABLE arena.t AS SELECT range AS i FROM range(200000)")
    return os.path.getsize(path)


def _truncated(path: Path) -> None:
    size = _good(path)
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)


def _bad_checksum(path: Path) -> None:
    _good(path)
    with open(path, "r+b") as fh:  # the first metadata block after the two headers
        fh.seek(4096 + 100)
        block = fh.read(64)
        fh.seek(4096 + 100)
        fh.write(bytes(b ^ 0xFF for b in block))


@pytest.mark.parametrize("damage", [_truncated, _bad_checksum], ids=["truncated", "checksum"])
@pytest.mark.parametrize("read_only", [False, True])
def test_damaged_file_is_reported_at_once_with_the_rebuild_command(tmp_path, damage, read_only):
    path = tmp_path / "warehouse.duckdb"
    damage(path)
    started = time.monotonic()
    with pytest.raises(WarehouseCorruptError) as caught:
        connect(str(path), read_only=read_only, timeout_s=30)
    assert time.monotonic() - started < 5  # not retried like a lock
    message = str(caught.value)
    assert f"the warehouse {path} is damaged (" in message
    assert f"mv {path} {path}.damaged && ARENA_WAREHOUSE={path} {REBUILD_COMMAND}" in message
    assert caught.value.retryable is False
    assert isinstance(caught.value.__cause__, duckdb.Error)


def test_a_sound_file_and_other_errors_are_unchanged(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    _good(path)
    with connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM arena.t").fetchone() == (200000,)
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database")
    with pytest.raises(duckdb.IOException, match="not a valid DuckDB database file"):
        connect(str(junk))


def test_check_is_warehouse_takes_a_new_file_or_a_warehouse_and_refuses_another_database(tmp_path):
    import duckdb
    import pytest

    from arena_pipeline.core.store.warehouse import NotAWarehouseError, check_is_warehouse

    with duckdb.connect(str(tmp_path / "new.duckdb")) as con:
        check_is_warehouse(con, "new.duckdb")  # empty: a new warehouse
        con.execute("CREATE SCHEMA arena_versions")
        con.execute("CREATE TABLE arena_versions.builds (build_id VARCHAR)")
        con.execute("CREATE TABLE notes (x INTEGER)")  # a warehouse with a table of someone's beside it
        check_is_warehouse(con, "new.duckdb")
    with duckdb.connect(str(tmp_path / "other.duckdb")) as con:
        for i in range(7):
            con.execute(f"CREATE TABLE t{i} (x INTEGER)")
        with pytest.raises(NotAWarehouseError, match=r"other\.duckdb .* 7 table\(s\) or view\(s\) "
                                                    r"\(main\.t0, .*main\.t4 and 2 more\)"):
            check_is_warehouse(con, "other.duckdb")


def test_connections_opened_and_closed_by_two_threads_never_fail(tmp_path):
    """DuckDB refuses, for an instant, to attach a file whose last connection another thread of the same
    process is closing ("Unique file handle conflict"); the Parquet export ahead runs in a worker thread
    beside the steps, so connect() waits that instant out like a lock (plain duckdb.connect failed 4 of
    600 such connections here)."""
    import threading

    path = str(tmp_path / "w.duckdb")
    with connect(path) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    errors: list[str] = []

    def open_and_close() -> None:
        for _ in range(300):
            try:
                con = connect(path, timeout_s=5)
                con.execute("SELECT * FROM t").fetchall()
                con.close()
            except Exception as exc:  # noqa: BLE001 - any failure is what the test counts
                errors.append(repr(exc))

    threads = [threading.Thread(target=open_and_close) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_stream_frames_gives_batches_and_one_empty_frame_of_the_schema_when_there_are_no_rows():
    with duckdb.connect() as con:
        con.execute("CREATE TABLE t AS SELECT range AS i, range::VARCHAR AS s FROM range(2500)")
        frames = list(stream_frames(con, "SELECT * FROM t WHERE i >= ? ORDER BY i", [100], batch_rows=1000))
        first, rest = frames[0], frames[1:]
        heights = [f.height for f in [first, *rest]]
        assert sum(heights) == 2400 and len(heights) >= 3 and max(heights) <= 1000
        assert first["i"][0] == 100 and rest[-1]["i"][-1] == 2499
        empty = list(stream_frames(con, "SELECT * FROM t WHERE i < 0", batch_rows=1000))
        assert len(empty) == 1 and empty[0].height == 0 and empty[0].columns == ["i", "s"]
        assert str(empty[0].schema["s"]) == "String"
