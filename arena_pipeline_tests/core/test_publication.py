"""Versioned tables, the dump history and atomic publication."""

from __future__ import annotations

import duckdb
import pytest

from arena_pipeline.core.publication import (
    drop_old_versions,
    publish,
    published_revision,
    record_dump,
    revision_key,
    versioned,
)

SHA1 = "1" * 40
SHA2 = "2" * 40
SHA3 = "3" * 40


@pytest.fixture
def con(tmp_path):
    connection = duckdb.connect(str(tmp_path / "w.duckdb"))
    connection.execute("CREATE SCHEMA arena_versions")
    yield connection
    connection.close()


def _write(con, revision: str, n: int) -> None:
    for table in ("battles", "leaderboard"):
        con.execute(f"CREATE OR REPLACE TABLE {versioned(table, revision)} AS "
                    f"SELECT range AS i, '{revision}' AS dump_revision FROM range({n})")


def test_revision_key():
    assert revision_key(SHA1) == "111111111111"
    assert revision_key("local-ABCdef0123456789") == "local_abcdef0123456789"
    with pytest.raises(ValueError):
        revision_key("///")


def test_publish_points_all_views_at_one_revision(con):
    _write(con, SHA1, 3)
    record_dump(con, "arena", revision=SHA1, status="loaded", source="org/name", rows=3,
                files=[{"file": "a", "bytes": 1}])
    first = publish(con, "arena", SHA1, ["battles", "leaderboard"], history_tables=("leaderboard",))
    assert first.previous is None and published_revision(con, "arena") == SHA1
    assert con.execute("SELECT count(*) FROM arena.battles").fetchone() == (3,)
    _write(con, SHA2, 5)
    second = publish(con, "arena", SHA2, ["battles", "leaderboard"], history_tables=("leaderboard",))
    assert second.previous == SHA1
    assert con.execute("SELECT DISTINCT dump_revision FROM arena.battles").fetchall() == [(SHA2,)]
    assert con.execute("SELECT DISTINCT dump_revision FROM arena.leaderboard").fetchall() == [(SHA2,)]
    history = con.execute("SELECT dump_revision, count(*) FROM arena.leaderboard_history GROUP BY 1 ORDER BY 1")
    assert history.fetchall() == [(SHA1, 3), (SHA2, 5)]
    statuses = con.execute("SELECT revision, status, rows FROM arena.dumps ORDER BY revision").fetchall()
    assert statuses == [(SHA1, "superseded", 3), (SHA2, "published", None)]
    # the superseded dump's big tables are dropped, its history table is kept
    assert "battles__111111111111" in second.dropped
    assert "leaderboard__111111111111" not in second.dropped


def test_retention_limits_history(con):
    for sha, n in ((SHA1, 1), (SHA2, 2), (SHA3, 3)):
        _write(con, sha, n)
        publish(con, "arena", sha, ["battles", "leaderboard"], history_tables=("leaderboard",), retention=2)
    revisions = con.execute("SELECT DISTINCT dump_revision FROM arena.leaderboard_history ORDER BY 1").fetchall()
    assert revisions == [(SHA2,), (SHA3,)]
    tables = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'arena_versions'").fetchall()}
    assert tables == {"battles__333333333333", "leaderboard__333333333333", "leaderboard__222222222222"}


def test_publish_refuses_incomplete_revision_and_changes_nothing(con):
    _write(con, SHA1, 3)
    publish(con, "arena", SHA1, ["battles", "leaderboard"])
    con.execute(f"CREATE TABLE {versioned('battles', SHA2)} AS SELECT 1 AS i, '{SHA2}' AS dump_revision")
    with pytest.raises(LookupError, match="not written yet: leaderboard"):
        publish(con, "arena", SHA2, ["battles", "leaderboard"])
    assert published_revision(con, "arena") == SHA1
    assert con.execute("SELECT DISTINCT dump_revision FROM arena.battles").fetchall() == [(SHA1,)]


def test_record_dump_keeps_known_fields_and_rejects_unknown_status(con):
    record_dump(con, "arena", revision=SHA1, status="fetched", source="org/name", rows=10)
    record_dump(con, "arena", revision=SHA1, status="failed", detail="boom")
    row = con.execute("SELECT source, rows, status, status_detail FROM arena.dumps").fetchone()
    assert row == ("org/name", 10, "failed", "boom")
    with pytest.raises(ValueError, match="unknown dump status"):
        record_dump(con, "arena", revision=SHA1, status="weird")


def test_drop_old_versions_keeps_published(con):
    _write(con, SHA1, 1)
    _write(con, SHA2, 1)
    dropped = drop_old_versions(con, published=SHA2, kept=set())
    assert sorted(dropped) == ["battles__111111111111", "leaderboard__111111111111"]
