"""A small store published at the core level (no Dagster): a vote table kept as Parquet and a board, per build."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.publication.gate import plan_tables
from arena_pipeline.core.store.connections import FILES_FOLDER
from arena_pipeline.core.store.publish import PublishReport, publish
from arena_pipeline.core.store.records import record_dump
from arena_pipeline.core.store.snapshot import WORK_FILE, SnapshotTarget, files_of, store_folder
from arena_pipeline.core.store.versions import Build, record_checks, start_build, version_name, write_version

TABLES = ["battles", "leaderboard"]
RULES = {"derived_from": {"leaderboard": ("battles",)}, "built_together": (), "checked": ("battles",)}


def small_build(con: duckdb.DuckDBPyConnection, run: str, revision: str, n: int = 3) -> Build:
    """Build ``run`` of ``revision`` in the work file ``con``: ``n`` battles (checked) and a two-model board,
    each row tagged with the run."""
    manifest = DumpManifest("hub", "org/name", "main", revision, (ShardFile("/x/a.parquet", "a.parquet", 10, n, "ab"),))
    build = start_build(con, "arena", run, manifest)
    record_dump(con, "arena", revision=revision, status="fetched", source="org/name", rows=n)
    write_version(con, "battles", build, pl.DataFrame({"i": list(range(n)), "tag": [run] * n}))
    record_checks(con, version_name("battles", build), True, {"suite": "battles"})
    write_version(con, "leaderboard", build, pl.DataFrame({"model": ["a", "b"], "tag": [run] * 2}))
    return build


@pytest.fixture
def work(tmp_path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The open work file of a new store beside ``tmp_path / "warehouse.duckdb"`` (closed after the test)."""
    folder = store_folder(tmp_path / "warehouse.duckdb")
    folder.mkdir()
    con = duckdb.connect(str(folder / WORK_FILE))
    yield con
    con.close()


@dataclasses.dataclass
class SmallStore:
    """A work file (open) and the snapshot target of the readers' file ``path`` beside its store folder."""

    con: duckdb.DuckDBPyConnection
    target: SnapshotTarget

    @property
    def runs(self) -> int:
        """The builds the work file holds (the next one is ``run-<runs + 1>``)."""
        names = {r[0] for r in self.con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = "
                                                "'arena_versions'").fetchall()}
        return self.con.execute("SELECT count(*) FROM arena_versions.builds").fetchone()[0] if "builds" in names else 0

    @property
    def path(self) -> Path:
        return self.target.path

    @property
    def work(self) -> Path:
        return self.target.files.parent / WORK_FILE

    def build(self, revision: str, n: int = 3) -> Build:
        """A build of ``revision`` (:func:`small_build`), the next run."""
        return small_build(self.con, f"run-{self.runs + 1}", revision, n)

    def publish(self, revision: str = "1" * 40, n: int = 3) -> PublishReport:
        """A build of ``revision`` published (the readers' file replaced)."""
        build = self.build(revision, n)
        chosen, rebuilt = plan_tables(self.con, "arena", build, TABLES, **RULES)
        return publish(self.con, "arena", build, chosen, rebuilt=rebuilt, history_tables=("leaderboard",),
                       targets=[self.target], files_of=files_of(self.con, self.target))

    def close(self) -> None:
        self.con.close()


def small_store(path: Path, **target: int) -> SmallStore:
    """A new store whose readers' file is ``path`` (its folder beside it; ``target``: SnapshotTarget's
    retention settings)."""
    folder = store_folder(path)
    folder.mkdir(parents=True, exist_ok=True)
    return SmallStore(duckdb.connect(str(folder / WORK_FILE)),
                      SnapshotTarget(path, folder / FILES_FOLDER, frozenset({"battles"}), **target))


def look(con: duckdb.DuckDBPyConnection) -> str:
    """What a connection to a snapshot reads: the live publication id and the runs its tables come from."""
    pid = con.execute("SELECT max(publication_id) FROM arena.publications").fetchone()[0]
    tags = sorted({r[0] for r in con.execute("SELECT tag FROM arena.battles UNION "
                                             "SELECT tag FROM arena.leaderboard").fetchall()})
    return f"{pid} {','.join(tags)}"
