"""The readers' entry: a new connection reads the newest publication even in a process that holds an
old one open; a held connection keeps its publication's tables for keep_publications publications,
whatever their revision, and is then told which publication it holds and to reconnect."""

from __future__ import annotations

import duckdb
import pytest

from arena_pipeline import reader
from arena_pipeline.core.store.reader import files_gone_message, held_publication, open_newest
from arena_pipeline.core.store.warehouse import connect as connect_warehouse
from arena_pipeline_tests.support.small_store import look, small_store


def test_a_new_connection_reads_the_newest_publication_while_an_old_one_stays_open(tmp_path):
    store = small_store(tmp_path / "warehouse.duckdb")
    try:
        store.publish("1" * 40)
        held = connect_warehouse(str(store.path), read_only=True)  # a pooled connection of this process
        held_newest = open_newest(str(store.path))
        try:
            store.publish("2" * 40)
            # DuckDB shares one database per path and process: a plain connect reads the held one's publication
            with connect_warehouse(str(store.path), read_only=True) as plain:
                assert look(plain) == "1 run-1"
            with open_newest(str(store.path)) as newest:  # the reader entry opens the file as it is now
                assert look(newest) == "2 run-2" and held_publication(newest) == 2
                # the views' arena_versions.* resolve inside the attached snapshot, not the session's catalog
                newest.execute("CREATE SCHEMA memory.arena_versions")
                assert look(newest) == "2 run-2"
            assert look(held) == "1 run-1" and look(held_newest) == "1 run-1"  # held: what they opened
        finally:
            held.close()
            held_newest.close()
    finally:
        store.close()


def test_the_public_entry_reads_ARENA_WAREHOUSE_when_called(tmp_path, monkeypatch):
    store = small_store(tmp_path / "warehouse.duckdb")
    try:
        store.publish("1" * 40)
    finally:
        store.close()
    monkeypatch.delenv("ARENA_WAREHOUSE", raising=False)
    import arena_pipeline.reader as fresh  # imported with the variable unset: read at call time, not import

    monkeypatch.setenv("ARENA_WAREHOUSE", str(store.path))
    with fresh.connect() as con:
        assert look(con) == "1 run-1"
        assert con.execute("SELECT count(*) FROM arena.leaderboard").fetchone()[0] == 2
    with reader.connect(store.path) as con:
        with pytest.raises(duckdb.Error):  # read-only
            con.execute("DELETE FROM arena.dumps")


def test_a_held_connection_keeps_its_tables_across_same_revision_publications_then_is_told_to_reconnect(tmp_path):
    store = small_store(tmp_path / "warehouse.duckdb", keep_revisions=2, keep_publications=2)
    try:
        store.publish("1" * 40)
        held = reader.connect(store.path)
        try:
            # the same revision again (an alias change, a code upgrade): new vote-table versions each time
            for _ in range(2):
                store.publish("1" * 40)
                assert look(held) == "1 run-1"  # its publication is among the two before the live one
            store.publish("1" * 40)
            with pytest.raises(duckdb.Error) as gone:
                held.execute("SELECT count(*) FROM arena.battles").fetchone()
            message = files_gone_message(held, gone.value, str(store.path))
            assert message is not None and "holds publication 1" in message and "reconnect" in message
            assert files_gone_message(held, duckdb.Error("Binder Error: no such column"), "x") is None
        finally:
            held.close()
        with reader.connect(store.path) as con:
            assert look(con) == "4 run-4"
    finally:
        store.close()
