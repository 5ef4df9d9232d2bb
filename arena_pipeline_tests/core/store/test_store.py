"""The Store: two connection types that cannot be confused, and targets brought level by leaving a work block."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import duckdb
import pytest

import arena_pipeline
from arena_pipeline.core.publication.gate import plan_tables
from arena_pipeline.core.store.catalog import TableSpec
from arena_pipeline.core.store.connections import (
    ReaderConnection,
    ReaderWriteError,
    WorkConnection,
    open_reader,
    require_work,
)
from arena_pipeline.core.store.publish import publish
from arena_pipeline.core.store.records import RECORD_TABLES, record_dump
from arena_pipeline.core.store.store import Store
from arena_pipeline.resources import Warehouse
from arena_pipeline_tests.support.small_store import RULES, TABLES, SmallStore

REVISION = "1" * 40

#: What only the store calls: writing the targets level, opening the snapshot or the lake by hand.
STORE_ONLY = {"sync_readers", "sync_snapshot", "sync_lake", "stage_snapshot", "open_newest", "connect_lake", "attach"}


def _store(tmp_path: Path) -> Store:
    return Store(tmp_path / "warehouse.duckdb", tmp_path / "warehouse.pipeline")


def _statuses(store: Store) -> list[tuple[str, str | None]]:
    with store.reader() as con:
        return con.execute("SELECT status, status_detail FROM arena.dumps ORDER BY revision").fetchall()


def test_a_reader_connection_reads_and_refuses_every_statement_that_writes(tmp_path):
    store = _store(tmp_path)
    with store.work() as work:
        record_dump(work, "arena", revision=REVISION, status="fetched")
    with store.reader() as con:
        assert isinstance(con, ReaderConnection) and not isinstance(con, WorkConnection)
        assert con.execute("SELECT status FROM arena.dumps").fetchall() == [("fetched",)]
        assert con.sql("SELECT count(*) FROM arena.dumps").fetchone() == (1,)
        for sql in ("CREATE TABLE arena.t (a INT)", "CREATE TEMP TABLE t AS SELECT 1",
                    "INSERT INTO arena.dumps (revision) VALUES ('x')", "UPDATE arena.dumps SET status = 'x'",
                    "DELETE FROM arena.dumps", "DROP TABLE arena.dumps", "ALTER TABLE arena.dumps ADD COLUMN b INT",
                    "ATTACH ':memory:' AS other", "SELECT 1; DROP TABLE arena.dumps"):
            with pytest.raises(ReaderWriteError):
                con.execute(sql)
            with pytest.raises(ReaderWriteError):
                con.sql(sql)
            with pytest.raises(ReaderWriteError):
                con.cursor().execute(sql)
        with pytest.raises(ReaderWriteError):
            con.append("dumps", None)
        assert con.execute("SELECT status FROM arena.dumps").fetchall() == [("fetched",)]
    with open_reader(store.snapshot_path) as con:  # the entry readers without a store settings use
        assert isinstance(con, ReaderConnection)
        with pytest.raises(duckdb.Error):  # a ReaderWriteError is a DuckDB error: readers handle one kind
            con.execute("DELETE FROM arena.dumps")


def test_what_writes_the_store_takes_the_work_connection_and_rejects_a_readers(tmp_path):
    store = _store(tmp_path)
    with store.work() as work:
        assert require_work(work) is work
        record_dump(work, "arena", revision=REVISION, status="fetched")
    for con in (store.reader(), open_reader(store.snapshot_path), duckdb.connect(":memory:")):
        with con:
            with pytest.raises(TypeError, match="work"):
                require_work(con)
            with pytest.raises(TypeError, match="work"):
                store.publish(con, None, {})
    # the resource has no read-only work connection any more: readers open Warehouse.reader
    assert list(inspect.signature(Warehouse.get_connection).parameters) == ["self"]


def test_a_record_written_through_the_store_is_read_by_a_fresh_reader_without_any_sync(tmp_path):
    store = _store(tmp_path)
    with store.work() as work:
        record_dump(work, "arena", revision=REVISION, status="fetched")
    assert _statuses(store) == [("fetched", None)]
    with store.work() as work:
        record_dump(work, "arena", revision=REVISION, status="failed", detail="rejected: not a dump")
    assert _statuses(store) == [("failed", "rejected: not a dump")]


def test_a_failed_block_brings_readers_level_and_keeps_its_own_error(tmp_path):
    store = _store(tmp_path)
    with pytest.raises(RuntimeError, match="the step's own error"), store.work() as work:
        record_dump(work, "arena", revision=REVISION, status="failed", detail="flatten: broken")
        raise RuntimeError("the step's own error")
    assert _statuses(store) == [("failed", "flatten: broken")]


def test_a_new_record_table_is_one_entry_of_RECORD_TABLES_and_reaches_readers(tmp_path, monkeypatch):
    monkeypatch.setitem(RECORD_TABLES, "toy_records", TableSpec(published=False))
    store = _store(tmp_path)
    with store.work() as work:
        work.execute("CREATE SCHEMA IF NOT EXISTS arena")
        work.execute("CREATE TABLE arena.toy_records AS SELECT 42 AS answer")
        record_dump(work, "arena", revision=REVISION, status="fetched")
    with store.reader() as con:
        assert con.execute("SELECT answer FROM arena.toy_records").fetchall() == [(42,)]


def test_a_block_that_says_nothing_new_of_a_dump_leaves_the_readers_file_to_the_next_outcome(tmp_path):
    store = _store(tmp_path)
    with store.work() as work:
        record_dump(work, "arena", revision=REVISION, status="fetched")
    before = store.snapshot_path.stat().st_ino
    with store.work() as work:  # a version, the checks' results of a run that goes on: no snapshot written
        work.execute("CREATE TABLE IF NOT EXISTS arena_versions.scratch AS SELECT 1 AS a")
        work.execute("CREATE TABLE arena.quality_results AS SELECT 'battles' AS suite")
    assert store.snapshot_path.stat().st_ino == before
    with pytest.raises(RuntimeError), store.work():  # the run then fails: readers get every record
        raise RuntimeError("a later step fails")
    with store.reader() as con:
        assert con.execute("SELECT suite FROM arena.quality_results").fetchall() == [("battles",)]


def test_a_publication_through_the_store_writes_the_readers_file_once(tmp_path):
    store = _store(tmp_path)
    with store.work() as work:
        build = SmallStore(work, store.snapshot_target(["battles"])).build(REVISION)
        chosen, rebuilt = plan_tables(work, "arena", build, TABLES, **RULES)
        report = store.publish(work, build, chosen, file_tables=["battles"], rebuilt=rebuilt,
                               history_tables=("leaderboard",))
        published = store.snapshot_path.stat().st_ino
    assert store.snapshot_path.stat().st_ino == published  # leaving the block: level already, nothing rewritten
    with store.reader() as con:
        assert con.execute("SELECT max(publication_id) FROM arena.publications").fetchone() == (report.publication_id,)
        assert con.execute("SELECT count(*) FROM arena.battles").fetchone() == (3,)


def test_a_publication_committed_without_its_targets_reaches_them_when_the_next_block_ends(tmp_path):
    # a run killed between the work file's COMMIT and the rename: the work file one publication ahead
    store = _store(tmp_path)
    with store.work() as work:
        build = SmallStore(work, store.snapshot_target(["battles"])).build(REVISION)
        chosen, rebuilt = plan_tables(work, "arena", build, TABLES, **RULES)
    work = store._open_work()
    try:
        publish(work, "arena", build, chosen, rebuilt=rebuilt, history_tables=("leaderboard",))  # no target
    finally:
        work.close()
    with store.work():
        pass
    with store.reader() as con:
        assert con.execute("SELECT max(publication_id) FROM arena.publications").fetchone() == (1,)


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            names.add(name)
            if name in {"connection", "get_connection"} and any(k.arg == "read_only" for k in node.keywords):
                names.add("connection(read_only=...)")
    return names


def test_only_the_store_writes_targets_level_or_opens_a_publication_by_hand():
    package = Path(arena_pipeline.__file__).parent
    store = package / "core" / "store"
    found = {}
    for path in sorted(package.rglob("*.py")):
        if store in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = _calls(tree) & (STORE_ONLY | {"connection(read_only=...)"})
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    for alias in node.names} & STORE_ONLY
        if calls | imported:
            found[str(path.relative_to(package))] = sorted(calls | imported)
    assert found == {}


def test_a_hold_that_writes_a_little_leaves_it_in_the_log_and_a_runs_last_write_checkpoints(tmp_path):
    """A hold does not checkpoint the work file on closing (an unchanged re-run's ~20 holds each rewrote ~2 MiB
    of it): what it wrote stays in the write-ahead log, which the next open replays; ``work(checkpoint=True)``
    (the gate's, a run's last write) leaves the file whole, with no log."""
    store = _store(tmp_path)
    with store.work() as work:
        work.execute("CREATE SCHEMA arena_versions")
        work.execute("CREATE TABLE arena_versions.notes (n INTEGER)")
    with store.work(checkpoint=True):
        pass
    wal = Path(f"{store.work_path}.wal")
    before = store.work_path.stat()
    assert not wal.exists()
    for n in range(3):
        with store.work() as work:
            work.execute("INSERT INTO arena_versions.notes VALUES (?)", [n])
    after = store.work_path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)  # the file itself untouched
    assert 0 < wal.stat().st_size < 64 * 1024
    with store.work(checkpoint=True) as work:
        assert work.execute("SELECT list(n ORDER BY n) FROM arena_versions.notes").fetchone() == ([0, 1, 2],)
    assert not wal.exists()
    with duckdb.connect(str(store.work_path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM arena_versions.notes").fetchone() == (3,)


def test_the_log_size_past_which_a_commit_checkpoints_is_the_one_the_docs_give():
    from arena_pipeline.core.store.store import WORK_CHECKPOINT

    text = (Path(arena_pipeline.__file__).parents[1] / "docs" / "scaling.md").read_text(encoding="utf-8")
    assert [f"{n}MiB" for n in re.findall(r"a write past (\d+) MiB of log", text)] == [WORK_CHECKPOINT]
