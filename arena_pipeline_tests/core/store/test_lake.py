"""The DuckLake target on a real PostgreSQL: a publication is one DuckLake snapshot, vote tables written
once, the layout readers query the same as the snapshot's, two writers never mixed, retention cleans files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from arena_pipeline.core.publication.gate import plan_tables
from arena_pipeline.core.store import snapshot
from arena_pipeline.core.store.lake import (
    LakeAheadError,
    LakeConflictError,
    LakeTarget,
    connect_lake,
    lake_snapshots,
    stage_lake,
    sync_lake,
)
from arena_pipeline.core.store.publish import publish
from arena_pipeline_tests.core.store.test_snapshot import _target
from arena_pipeline_tests.support.small_store import RULES, TABLES
from arena_pipeline_tests.support.small_store import small_build as _build

pytestmark = pytest.mark.slow  # a PostgreSQL server for the session


def build_version(con, table: str) -> str:
    """The live version of ``table``."""
    return con.execute(f"SELECT sql FROM duckdb_views() WHERE schema_name = 'arena' AND view_name = '{table}'"
                       ).fetchone()[0].rpartition("arena_versions.")[2].rstrip(";")


def _publish(con, build, target, lake: LakeTarget | None = None, **kwargs):
    """Publish ``build`` to the snapshot file ``target`` and the lake (the order of Warehouse.targets)."""
    chosen, rebuilt = plan_tables(con, "arena", build, TABLES, **RULES)
    return publish(con, "arena", build, chosen, rebuilt=rebuilt, history_tables=("leaderboard",),
                   targets=[target, *filter(None, [lake])], files_of=snapshot.files_of(con, target), **kwargs)


def _lake(new_lake, tmp_path: Path, retention: int = 5) -> LakeTarget:
    return LakeTarget(new_lake.attach, str(new_lake.data_path), tmp_path / "warehouse.pipeline" / "tables",
                      frozenset({"battles"}), retention, cleanup_after_s=0)


FRESH_READER = """
import json, sys
from arena_pipeline.core.store.lake import connect_lake
con = connect_lake(sys.argv[1], read_only=True)
con.execute("BEGIN TRANSACTION")
out = {"publication": con.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0],
       "leaderboard": sorted(con.execute("SELECT model, tag FROM arena.leaderboard").fetchall()),
       "battles": con.execute("SELECT count(*), min(tag), max(tag) FROM arena.battles").fetchone(),
       "history": con.execute("SELECT count(*) FROM arena.leaderboard_history").fetchone()[0]}
print(json.dumps(out))
"""


def _fresh_read(attach: str) -> dict:
    """What a new process attaching the lake read-only sees."""
    out = subprocess.run([sys.executable, "-c", FRESH_READER, attach], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _snapshot_read(target) -> dict:
    with target.open_reader() as con:  # as readers open it (the vote tables' files resolved)
        return {"publication": con.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0],
                "leaderboard": sorted(con.execute("SELECT model, tag FROM arena.leaderboard").fetchall()),
                "battles": con.execute("SELECT count(*), min(tag), max(tag) FROM arena.battles").fetchone(),
                "history": con.execute("SELECT count(*) FROM arena.leaderboard_history").fetchone()[0]}


def test_a_publication_is_one_lake_snapshot_read_by_a_fresh_process_as_the_snapshot_file(work, tmp_path, new_lake):
    snap, lake = _target(tmp_path), _lake(new_lake, tmp_path)
    _publish(work, _build(work, "run-1", "1" * 40, 3), snap, lake=lake)
    first = _fresh_read(lake.attach)
    assert first == json.loads(json.dumps(_snapshot_read(snap)))
    assert first["publication"] == 1 and first["battles"] == [3, "run-1", "run-1"]
    _publish(work, _build(work, "run-2", "2" * 40, 5), snap, lake=lake)
    second = _fresh_read(lake.attach)
    assert second == json.loads(json.dumps(_snapshot_read(snap)))
    assert second["publication"] == 2 and second["battles"] == [5, "run-2", "run-2"] and second["history"] == 4
    with connect_lake(lake.attach, read_only=True) as lk:
        # each publication one snapshot of the lake, naming its publication id
        named = [p for _, p in lake_snapshots(lk) if p is not None]
        assert named == [1, 2]
        # the same views with the same query as the work file (DuckLake keeps the view's name unqualified)
        views = ("SELECT view_name, sql[position(' AS ' IN sql):] FROM duckdb_views() WHERE database_name = {} "
                 "AND schema_name = 'arena' ORDER BY 1")
        assert lk.execute(views.format("'arena_lake'")).fetchall() == work.execute(
            views.format("current_database()")).fetchall()
        # the previous publication whole, by time travel to its snapshot
        (old,) = [s for s, p in lake_snapshots(lk) if p == 1]
    with duckdb.connect() as con:
        from arena_pipeline.core.store.lake import load_extensions

        load_extensions(con)
        con.execute(f"ATTACH '{lake.attach}' AS past (READ_ONLY, SNAPSHOT_VERSION {old})")
        assert con.execute("SELECT count(*), min(tag) FROM past.arena.battles").fetchone() == (3, "run-1")
        assert con.execute("SELECT max(publication_id) FROM past.arena.publications").fetchone()[0] == 1


def test_a_vote_table_version_is_written_once_and_a_rerank_writes_only_the_small_tables(work, tmp_path, new_lake):
    snap, lake = _target(tmp_path), _lake(new_lake, tmp_path)
    build = _build(work, "run-1", "1" * 40, 3)
    _publish(work, build, snap, lake=lake)
    staged = stage_lake(work, "arena", lake)  # the same publication again: nothing new to write
    try:
        assert staged.written == [] and staged.dropped == []
    finally:
        staged.discard()
    votes = new_lake.data_path / "arena_versions" / build_version(work, "battles")
    (file,) = votes.glob("*.parquet")  # DuckLake's folder per table
    records = {p.name for p in (new_lake.data_path / "arena" / "publications").glob("*.parquet")}
    sync_lake(work, "arena", lake)  # the records again (a refusal's): the vote table's file untouched
    assert list(votes.glob("*.parquet")) == [file]
    assert {p.name for p in (new_lake.data_path / "arena" / "publications").glob("*.parquet")} - records


def test_two_writers_one_wins_the_other_is_refused_and_nothing_is_mixed(tmp_path, new_lake):
    """Two stores publish to one lake at once: the lake commits one whole publication and refuses the other."""
    stores = []
    for name in ("a", "b"):
        root = tmp_path / name
        (root / "warehouse.pipeline").mkdir(parents=True)
        con = duckdb.connect(str(root / "warehouse.pipeline" / "work.duckdb"))
        _publish(con, _build(con, f"run-{name}", ("1" if name == "a" else "2") * 40, 3 if name == "a" else 4),
                 _target(root))
        stores.append((con, _lake(new_lake, root)))
    try:
        staged = [stage_lake(con, "arena", lake) for con, lake in stores]  # both transactions open at once
        staged[0].commit()
        with pytest.raises(LakeConflictError, match="another writer"):
            staged[1].commit()
        seen = _fresh_read(new_lake.attach)
        assert seen["battles"] == [3, "run-a", "run-a"] and {t for _, t in seen["leaderboard"]} == {"run-a"}
        # the refused store, trying again (its next sync), is refused before writing anything: the lake shows a
        # publication of the same id from another store; a store behind the lake is refused the same way
        with pytest.raises(LakeAheadError, match="another store publishes to it"):
            stage_lake(stores[1][0], "arena", stores[1][1])
        stores[1][0].execute("UPDATE arena.publications SET publication_id = 0")
        with pytest.raises(LakeAheadError, match="not older than this store's 0"):
            stage_lake(stores[1][0], "arena", stores[1][1])
        assert _fresh_read(new_lake.attach)["battles"] == [3, "run-a", "run-a"]
        # the winner's own store publishes its same publication again (a sync): allowed
        sync_lake(stores[0][0], "arena", stores[0][1])
    finally:
        for con, _ in stores:
            con.close()


def test_retention_expires_old_snapshots_and_deletes_their_files(work, tmp_path, new_lake):
    snap, lake = _target(tmp_path), _lake(new_lake, tmp_path, retention=1)
    for i in range(1, 4):
        report = _publish(work, _build(work, f"run-{i}", str(i) * 40, 2 + i), snap, lake=lake, retention=1)
    with connect_lake(lake.attach, read_only=True) as lk:
        assert {p for _, p in lake_snapshots(lk) if p is not None} == {3}
    # only the live publication's versions keep files: the older ones' were deleted with their snapshots
    kept = {p.parent.name for p in (new_lake.data_path / "arena_versions").glob("*__*/*.parquet")}
    assert kept == {report.tables["battles"], report.tables["leaderboard"]}


def test_without_postgres_the_lake_tests_skip_with_one_reason_except_under_ci(monkeypatch):
    from arena_pipeline_tests.support import postgres as support

    monkeypatch.setattr(support, "postgres_bin", lambda: None)
    monkeypatch.setenv("CI", "true")
    reason = support.missing()
    assert reason and "PostgreSQL" in reason
    with pytest.raises(pytest.fail.Exception) as failed:
        support.skip_or_fail_without_lake()
    assert failed.value.msg.startswith(f"{reason}; ") and "CI must run them" in failed.value.msg
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception) as skipped:
        support.skip_or_fail_without_lake()
    assert skipped.value.msg == reason
