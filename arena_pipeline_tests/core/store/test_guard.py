"""The published file is ours alone: a file the store did not publish is never replaced, a symbolic link
publishes to its file, the snapshot keeps its mode and group, and a stale write-ahead log never reaches
the next snapshot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import duckdb
import pytest

from arena_pipeline.core.store.guard import ForeignFileError, check_replaceable, store_publications
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline.resources import Warehouse
from arena_pipeline_tests.support.small_store import look, small_store


def _user_database(path):
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE my_results AS SELECT 42 AS answer")
        con.execute("CREATE SCHEMA notes; CREATE TABLE notes.t AS SELECT 'keep me' AS note")


def _other_store_snapshot(path):
    other = small_store(path.parent / "other" / "warehouse.duckdb")
    try:
        other.publish("9" * 40)
    finally:
        other.close()
    shutil.copy(other.path, path)


FOREIGN = {
    "a user's database": _user_database,
    "a text file": lambda path: path.write_text("my notes\n"),
    "another store's snapshot": _other_store_snapshot,
    "a folder": lambda path: path.mkdir(),
}


@pytest.mark.parametrize("kind", FOREIGN)
def test_a_file_the_store_did_not_publish_is_never_replaced(tmp_path, kind):
    store = small_store(tmp_path / "warehouse.duckdb")
    try:
        store.publish("1" * 40)
        store.path.unlink()
        FOREIGN[kind](store.path)
        before = store.path.read_bytes() if store.path.is_file() else None
        # right before the rename, whatever happened since the start
        with pytest.raises(ForeignFileError):
            store.publish("2" * 40)
        store.close()
        # at the start of a run: the resource's first writing connection refuses, one line naming the file
        with pytest.raises(ForeignFileError) as refused, Warehouse(database=str(store.path)).get_connection():
            pass
        message = str(refused.value)
        assert str(store.path) in message and "nothing was written" in message and "\n" not in message
        assert (store.path.read_bytes() if store.path.is_file() else None) == before
        if kind == "a user's database":
            with connect_warehouse(str(store.path), read_only=True) as con:
                assert con.execute("SELECT answer FROM my_results").fetchall() == [(42,)]
                assert con.execute("SELECT note FROM notes.t").fetchall() == [("keep me",)]
    finally:
        store.close()


def test_a_copied_store_with_its_snapshot_publishes_and_an_empty_file_is_replaced(tmp_path):
    store = small_store(tmp_path / "a" / "warehouse.duckdb")
    try:
        store.publish("1" * 40)
        store.con.execute("CHECKPOINT")
        shutil.copytree(tmp_path / "a", tmp_path / "b")
    finally:
        store.close()
    copy = small_store(tmp_path / "b" / "warehouse.duckdb")
    try:
        assert copy.publish("2" * 40).publication_id == 2  # the copy's publications are its snapshot's
        copy.path.unlink()
        copy.path.write_bytes(b"")  # an empty file: nothing to lose
        copy.publish("3" * 40)
        with connect_warehouse(str(copy.path), read_only=True) as con:
            assert look(con).startswith("3 ")
    finally:
        copy.close()


def test_a_work_file_restored_from_an_older_backup_is_refused(tmp_path):
    store = small_store(tmp_path / "warehouse.duckdb")
    store.publish("1" * 40)
    store.con.execute("CHECKPOINT")
    backup = tmp_path / "backup.duckdb"
    shutil.copy(store.work, backup)
    store.publish("2" * 40)
    store.close()
    shutil.copy(backup, store.work)  # the work file of publication 1; the snapshot shows publication 2
    with pytest.raises(ForeignFileError, match="ends at publication 1") as refused:
        with Warehouse(database=str(store.path)).get_connection():
            pass
    assert "shows publication 2" in str(refused.value) and "backup" in str(refused.value)
    with connect_warehouse(str(store.path), read_only=True) as con:
        assert look(con) == "2 run-2"


def test_a_symbolic_link_publishes_to_its_file_which_keeps_its_mode_and_group(tmp_path):
    real = tmp_path / "shared" / "warehouse.duckdb"
    real.parent.mkdir()
    link = tmp_path / "warehouse.duckdb"
    link.symlink_to(real)
    store = small_store(link)
    try:
        store.publish("1" * 40)
        assert link.is_symlink() and real.is_file()
        os.chmod(real, 0o640)
        groups = [g for g in ([*os.getgroups(), 4] if os.getuid() == 0 else os.getgroups()) if g != real.stat().st_gid]
        if groups:
            os.chown(real, -1, groups[0])
        given = real.stat()
        store.publish("2" * 40)
        assert link.is_symlink() and os.readlink(link) == str(real)  # the link stays, and leads to the new file
        with connect_warehouse(str(link), read_only=True) as con:
            assert look(con) == "2 run-2"
        now = real.stat()
        assert now.st_ino != given.st_ino and oct(now.st_mode & 0o7777) == "0o640"
        assert now.st_gid == given.st_gid
    finally:
        store.close()


def test_a_stale_write_ahead_log_beside_the_snapshot_never_reaches_the_next_one(tmp_path):
    store = small_store(tmp_path / "warehouse.duckdb")
    try:
        store.publish("1" * 40)
        # a reader that opened the snapshot read-write (DuckDB's default) changed it and left its log
        writer = duckdb.connect(str(store.path))
        writer.execute("PRAGMA disable_checkpoint_on_shutdown")
        writer.execute("SET wal_autocheckpoint = '1TB'")
        writer.execute("DELETE FROM arena.dumps")
        writer.close()
        assert (tmp_path / "warehouse.duckdb.wal").is_file()
        store.publish("2" * 40)
        assert not (tmp_path / "warehouse.duckdb.wal").exists()
        with connect_warehouse(str(store.path)) as con:  # read-write: a log would be replayed here
            assert con.execute("SELECT count(*) FROM arena.dumps").fetchone()[0] == 2
            assert look(con) == "2 run-2"
    finally:
        store.close()


def test_a_snapshot_held_read_write_is_refused_naming_the_process(tmp_path):
    store = small_store(tmp_path / "warehouse.duckdb")
    try:
        store.publish("1" * 40)
        code = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(60)"
        holder = subprocess.Popen([sys.executable, "-c", code, str(store.path)], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            with pytest.raises(ForeignFileError, match="read-only") as refused:
                check_replaceable(store.path, store.work, store_publications(store.con, "arena"))
            assert f"PID {holder.pid}" in str(refused.value) or f"process {holder.pid}" in str(refused.value)
        finally:
            holder.kill()
            holder.wait()
    finally:
        store.close()
