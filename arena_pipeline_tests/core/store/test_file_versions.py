"""Versions stored as Parquet files: written once, in folders unique to the attempt (a retried step writes
new files and never rewrites what an attempt wrote), a failed attempt leaves nothing, and the files no
version or kept publication names are pruned."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from arena_pipeline.core.dataset.manifest import DumpManifest, ShardFile
from arena_pipeline.core.store.records import VERSIONS
from arena_pipeline.core.store.versions import (
    PART_GLOB,
    reusable_version,
    start_build,
    version_files,
    versioned,
    write_file_versions,
)
from arena_pipeline.core.store.warehouse import connect

TABLES = ("battles", "messages")


@pytest.fixture
def store(tmp_path):
    folder = tmp_path / "warehouse.pipeline"
    folder.mkdir()
    con = connect(str(folder / "work.duckdb"))  # relative file names resolve against the store folder
    yield con, folder
    con.close()


def _build(con, run: str = "run-1"):
    manifest = DumpManifest("hub", "org/name", "main", "1" * 40, (ShardFile("/x/a.parquet", "a.parquet", 10, 4, "ab"),))
    return start_build(con, "arena", run, manifest)


def _writer(n: int, fail_after_first_part: bool = False):
    def fill(folders: dict[str, Path]) -> dict[str, int]:
        for table, folder in folders.items():
            assert folder.is_dir() and not any(folder.iterdir())  # a new, empty folder per attempt
            for part in range(2):
                pl.DataFrame({"i": list(range(part * n, (part + 1) * n)), "t": [table] * n}).write_parquet(
                    folder / f"part-{part:06d}.parquet")
                if fail_after_first_part:
                    raise OSError("the step was killed while writing")
        return dict.fromkeys(folders, 2 * n)
    return fill


def _snapshot_of_files(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in (folder / "tables").rglob("*") if p.is_file()}


def test_a_retried_step_writes_new_files_and_never_touches_an_earlier_attempts(store):
    con, folder = store
    files = folder / "tables"
    build = _build(con)
    with pytest.raises(OSError, match="killed"):  # the first attempt fails midway: nothing of it stays
        write_file_versions(con, TABLES, build, files, _writer(3, fail_after_first_part=True))
    assert list(files.iterdir()) == []
    assert con.execute(f"SELECT count(*) FROM {VERSIONS}").fetchone()[0] == 0

    assert write_file_versions(con, TABLES, build, files, _writer(3)) == {"battles": 6, "messages": 6}
    first = {t: version_files(con, f"{t}__111111111111__{build.key}") for t in TABLES}
    written = _snapshot_of_files(folder)
    # the step retried once more (it succeeded, then the run retried it): new folders, the first ones untouched
    write_file_versions(con, TABLES, build, files, _writer(3))
    second = {t: version_files(con, f"{t}__111111111111__{build.key}") for t in TABLES}
    assert all(first[t] != second[t] for t in TABLES)
    now = _snapshot_of_files(folder)
    assert {k: v for k, v in now.items() if k in written} == written
    for table in TABLES:
        version = f"{table}__111111111111__{build.key}"
        rows = con.execute(f"SELECT i, t FROM {versioned(version)} ORDER BY i").fetchall()
        assert rows == [(i, table) for i in range(6)]  # the same rows
        assert len(list((folder / second[table]).glob(PART_GLOB))) == 2
        # the version is its files: a view over them in the work file, no copy of its rows
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [version]).fetchone()[0] == 0


def test_a_version_stored_as_files_can_be_reused_and_is_read_from_another_working_directory(store, monkeypatch,
                                                                                              tmp_path):
    con, folder = store
    build = _build(con)
    write_file_versions(con, TABLES, build, folder / "tables", _writer(2), settings={"s": 1})
    con.execute(f"UPDATE {VERSIONS} SET build_id = 'other'")  # another build made it
    assert reusable_version(con, "battles", build, {"s": 1}) is not None
    con.close()
    monkeypatch.chdir(tmp_path.parent)
    with connect(str(folder / "work.duckdb"), read_only=True) as again:
        assert again.execute(f"SELECT count(*) FROM {versioned('battles__111111111111__' + build.key)}").fetchone() == (4,)
    with duckdb.connect(str(folder / "work.duckdb"), read_only=True) as plain, pytest.raises(duckdb.IOException):
        # without the search path: the names are relative to the store folder
        plain.execute(f"SELECT count(*) FROM {versioned('battles__111111111111__' + build.key)}").fetchone()
