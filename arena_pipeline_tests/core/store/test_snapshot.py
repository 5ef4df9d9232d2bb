"""The readers' snapshot: published by one rename, held connections keep their publication, vote tables
written once as Parquet and pruned, a crash healed by a sync, a warehouse from before adopted in place,
and a file that is not a warehouse never replaced."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from arena_pipeline.core.publication.gate import plan_tables
from arena_pipeline.core.store import snapshot
from arena_pipeline.core.store.publish import publish
from arena_pipeline.core.store.snapshot import (
    SnapshotTarget,
    adopt_legacy,
    kind_of,
    store_folder,
    sync_snapshot,
)
from arena_pipeline.core.store.warehouse import NotAWarehouseError, connect
from arena_pipeline_tests.support.small_store import RULES, TABLES
from arena_pipeline_tests.support.small_store import small_build as _build


def _target(root: Path, keep_revisions: int = 2) -> SnapshotTarget:
    return SnapshotTarget(root / "warehouse.duckdb", root / "warehouse.pipeline" / "tables",
                          frozenset({"battles"}), keep_revisions)


def _publish(con, build, target: SnapshotTarget | None, **kwargs):
    chosen, rebuilt = plan_tables(con, "arena", build, TABLES, **RULES)
    return publish(con, "arena", build, chosen, rebuilt=rebuilt, history_tables=("leaderboard",),
                   targets=[target] if target else (),
                   files_of=snapshot.files_of(con, target) if target else lambda version: None, **kwargs)


# a reader resolves the vote tables' files against the snapshot's folder (warehouse.search_path)
READER = """
import duckdb, os, sys
con = duckdb.connect(sys.argv[1], read_only=True, config={"file_search_path": os.path.dirname(sys.argv[1])})
def look():
    pid = con.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0]
    tags = sorted({r[0] for r in con.execute("SELECT tag FROM arena.battles UNION SELECT tag FROM arena.leaderboard").fetchall()})
    print(pid, ",".join(tags), flush=True)
look()
for _ in sys.stdin:
    look()
"""


def _look(path: Path) -> str:
    with connect(str(path), read_only=True) as con:
        pid = con.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0]
        tags = sorted({r[0] for r in con.execute("SELECT tag FROM arena.battles UNION "
                                                 "SELECT tag FROM arena.leaderboard").fetchall()})
    return f"{pid} {','.join(tags)}"


def test_a_held_connection_keeps_its_publication_and_a_new_one_sees_the_next(work, tmp_path):
    target = _target(tmp_path)
    _publish(work, _build(work, "run-1", "1" * 40, 3), target)
    # a reader in another process holds the snapshot open across the next publication
    reader = subprocess.Popen([sys.executable, "-c", READER, str(target.path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "1 run-1"
        report = _publish(work, _build(work, "run-2", "2" * 40, 5), target)
        assert report.publication_id == 2
        reader.stdin.write("again\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "1 run-1"  # its publication, whole, until it reconnects
    finally:
        reader.stdin.close()
        reader.wait(timeout=30)
    assert _look(target.path) == "2 run-2"  # a new connection: the new publication
    # the snapshot has the work file's published layout: the same views, with the same SQL
    views = "SELECT view_name, sql FROM duckdb_views() WHERE schema_name = 'arena' ORDER BY 1"
    with duckdb.connect(str(target.path), read_only=True) as snap:
        assert snap.execute(views).fetchall() == work.execute(views).fetchall()
        assert snap.execute("SELECT count(*) FROM arena.leaderboard_history").fetchone()[0] == 4
        assert snap.execute("SELECT count(*) FROM arena_versions.builds").fetchone()[0] == 2
        # the vote table reads its Parquet file; the small tables are copied
        sql = snap.execute("SELECT sql FROM duckdb_views() WHERE schema_name = 'arena_versions'").fetchall()
        assert len(sql) == 1 and "read_parquet" in sql[0][0] and "battles__222222222222" in sql[0][0]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_vote_tables_are_written_once_per_version_and_pruned_beyond_the_kept_revisions(work, tmp_path):
    target = dataclasses.replace(_target(tmp_path, keep_revisions=1), keep_publications=0)  # by revision alone
    first = _build(work, "run-1", "1" * 40, 3)
    _publish(work, first, target)
    (file,) = target.files.glob("*.parquet")
    inode = file.stat().st_ino
    sync_snapshot(work, "arena", target)  # a records-only sync: the same file, not written again
    assert file.stat().st_ino == inode and list(target.files.glob("*.parquet")) == [file]
    for n, revision in enumerate("234", start=2):
        _publish(work, _build(work, f"run-{n}", revision * 40, n), target)
    kept = sorted(p.name.split("__")[1] for p in target.files.glob("*.parquet"))
    assert kept == ["333333333333", "444444444444"]  # the live revision and one more
    assert _look(target.path) == "4 run-4"


def test_a_failure_before_the_commit_changes_neither_file(work, tmp_path):
    target = _target(tmp_path)
    _publish(work, _build(work, "run-1", "1" * 40, 3), target)
    before = target.path.read_bytes()

    def boom():
        raise RuntimeError("killed before the commit")

    with pytest.raises(RuntimeError):
        _publish(work, _build(work, "run-2", "2" * 40, 5), target, before_commit=boom)
    assert target.path.read_bytes() == before
    assert work.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_crash_between_the_commit_and_the_rename_is_brought_level_by_a_sync(work, tmp_path, monkeypatch):
    target = _target(tmp_path)
    _publish(work, _build(work, "run-1", "1" * 40, 3), target)

    def crash(self):
        raise OSError("the process died before the rename")

    with monkeypatch.context() as patched:
        patched.setattr(snapshot.StagedSnapshot, "swap", crash)
        with pytest.raises(OSError):
            _publish(work, _build(work, "run-2", "2" * 40, 5), target)
    assert _look(target.path) == "1 run-1"  # readers: still the complete publication 1
    assert work.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0] == 2
    assert sync_snapshot(work, "arena", target) == 2
    assert _look(target.path) == "2 run-2"


def test_a_warehouse_from_before_is_adopted_in_place_without_a_copy(tmp_path):
    legacy = tmp_path / "warehouse.duckdb"
    con = duckdb.connect(str(legacy))
    _publish(con, _build(con, "run-1", "1" * 40, 3), None)  # the old layout: readers and pipeline shared it
    con.close()
    assert kind_of(legacy) == "legacy"
    work = store_folder(legacy) / "work.duckdb"
    inode = legacy.stat().st_ino
    assert adopt_legacy(legacy, work)
    assert work.stat().st_ino == inode  # the same file, not a copy
    assert not adopt_legacy(legacy, work)  # once
    con = duckdb.connect(str(work))
    try:
        assert sync_snapshot(con, "arena", _target(tmp_path)) == 1
    finally:
        con.close()
    assert kind_of(legacy) == "snapshot" and _look(legacy) == "1 run-1"


@pytest.mark.parametrize("content", ["text", "other database"])
def test_a_file_that_is_not_a_warehouse_is_never_replaced(tmp_path, content):
    path = tmp_path / "warehouse.duckdb"
    if content == "text":
        path.write_text("not a database\n")
    else:
        with duckdb.connect(str(path)) as other:
            other.execute("CREATE TABLE main.customers AS SELECT 1 AS id")
    before = path.read_bytes()
    with pytest.raises(NotAWarehouseError, match="nothing was written into it"):
        adopt_legacy(path, store_folder(path) / "work.duckdb")
    assert path.read_bytes() == before and not store_folder(path).exists()


def test_the_store_folder_sits_beside_the_snapshot():
    assert store_folder("data/warehouse.duckdb") == Path("data/warehouse.pipeline")
    assert store_folder("data/boards") == Path("data/boards.pipeline")


def test_a_temporary_left_by_a_killed_process_is_removed(work, tmp_path):
    target = _target(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".warehouse.duckdb.{int(dead.stdout)}.0123abcd.tmp"
    stale.write_text("half a snapshot")
    mine = tmp_path / f".warehouse.duckdb.{os.getpid()}.0123abcd.tmp"
    mine.write_text("this process's")
    _publish(work, _build(work, "run-1", "1" * 40, 3), target)
    assert not stale.exists() and mine.exists()
    with duckdb.connect(str(target.path), read_only=True) as con:
        assert json.loads(con.execute("SELECT tables FROM arena.publications").fetchone()[0])


def test_a_snapshot_whose_store_is_missing_is_not_started_over(work, tmp_path):
    """Copying only the readers' file elsewhere and running there would start the publications over
    and replace its history: refused, naming the store it looked for."""
    target = _target(tmp_path)
    _publish(work, _build(work, "run-1", "1" * 40, 3), target)
    elsewhere = tmp_path / "copy"
    elsewhere.mkdir()
    (elsewhere / "warehouse.duckdb").write_bytes(target.path.read_bytes())
    with pytest.raises(snapshot.StoreMissingError) as refused:
        adopt_legacy(elsewhere / "warehouse.duckdb", store_folder(elsewhere / "warehouse.duckdb") / "work.duckdb")
    assert f"its pipeline store {store_folder(elsewhere / 'warehouse.duckdb')} " in str(refused.value)
    assert not store_folder(elsewhere / "warehouse.duckdb").exists()
