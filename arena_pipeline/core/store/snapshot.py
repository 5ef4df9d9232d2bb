"""The published snapshot: the live publication as a DuckDB file readers open, replaced atomically.

Readers (notebooks, BI pools, ``arena-pipeline``, the sensors) open ``ARENA_WAREHOUSE``; the pipeline
never opens that file read-write. It works in its own DuckDB file (the *work file*, in the store
folder beside the snapshot) and publishes by writing a new snapshot file next to the old one,
fsyncing it and renaming it over the old one (:class:`StagedSnapshot`). A connection opened before
the rename keeps reading the file it opened (the old inode), consistent, until it reconnects; a
connection opened after it reads the new publication. No lock is ever shared between them.

What a snapshot holds:

- the work file's published layout: every ``arena.*`` view with the same SQL, over the versions it
  names in ``arena_versions`` (the live ones, and the older boards the history views keep);
- the versions of the small tables (the boards, the comparisons, ``publication_changes``) and the
  records (``publications``, ``dumps``, ``quality_results``, ``arena_versions.builds``), copied (a few MB);
- the versions of the vote tables (``file_tables``: battles, messages, ...) as views over their
  Parquet files in the store folder, named relative to the snapshot's folder (a snapshot moved or copied
  with its store folder reads them; ``warehouse.search_path`` resolves them whatever the working
  directory). The load writes them once (``core.store.versions.write_file_versions``) and nothing copies
  them: a re-rank publication writes only the small tables. A vote table's version stored as a DuckDB
  table (a store from before) is exported once, by the publication that first shows it
  (:func:`export_version`).

Parquet files outlive the snapshots that name them: a reader holding an old snapshot open keeps its
vote tables while its publication is among the ``keep_publications`` before the live one, whatever its
revision, or is the newest of a revision among the ``keep_revisions`` newest beyond the live one; a
version the work file still holds keeps its files too (:func:`prune_files`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from arena_pipeline.constants import PUBLICATIONS_TABLE, VERSIONS_SCHEMA
from arena_pipeline.core.store import guard
from arena_pipeline.core.store.guard import SNAPSHOT_MARKER
from arena_pipeline.core.store.reader import open_newest
from arena_pipeline.core.store.records import VERSIONS, ensure_catalog, live_publication
from arena_pipeline.core.store.targets import PublicationPlan, plan_publication
from arena_pipeline.core.store.versions import PART_GLOB, version_files
from arena_pipeline.core.store.warehouse import (
    NotAWarehouseError,
    check_is_warehouse,
    corruption_error,
    quoted,
    relation_exists,
    search_path,
    sql_string,
)

#: The work file's name inside the store folder.
WORK_FILE = "work.duckdb"
#: Which snapshot file names which Parquet files (work file; one row per publication and file table).
SNAPSHOT_FILES = quoted(VERSIONS_SCHEMA, "snapshot_files")
SNAPSHOT_FILES_DDL = (f"CREATE TABLE IF NOT EXISTS {SNAPSHOT_FILES} (publication_id BIGINT, version VARCHAR, "
                      "file VARCHAR)")
#: Parquet writing: zstd level 1 (on conversation text without repeats as fast as snappy and a quarter
#: smaller) and row groups bounded in bytes, so a table of long texts is written within DuckDB's memory
#: limit (a row group a thread). Measured on the 1x synthetic warehouse (2 threads, 1 GB): the six vote
#: tables in 3.6 to 5.4 s wall, 5.5 to 6.6 s CPU with 256 MB row groups; 10.2 s wall, 17 s CPU with 64 MB.
PARQUET_OPTIONS = "FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, ROW_GROUP_SIZE_BYTES '256MB'"


def store_folder(snapshot: str | os.PathLike[str]) -> Path:
    """The default store folder of a snapshot path: ``data/warehouse.duckdb`` -> ``data/warehouse.pipeline``."""
    path = Path(snapshot)
    return path.with_name(f"{path.stem if path.suffix else path.name}.pipeline")


@dataclass(frozen=True)
class SnapshotTarget:
    """Where a publication goes: the readers' file, and the folder of the Parquet vote tables."""

    path: Path
    files: Path
    #: published tables stored as Parquet files (the vote tables: ``TableSpec.file_view``), not copied into
    #: each snapshot; None: the tables the store's earlier publications stored as files (:func:`recorded_file_tables`)
    file_tables: frozenset[str] | None = None
    #: dump revisions beyond the live one whose Parquet files stay for readers of older snapshots
    keep_revisions: int = 2
    #: publications beyond the live one whose Parquet files stay, whatever their revision (a reader holds
    #: its publication's tables this long, after a same-revision republish too)
    keep_publications: int = 3
    #: the target's name (``targets.PublicationTarget``)
    name: str = "snapshot"

    def prepare(self) -> None:
        """Refuse a file at ``path`` that is not a warehouse (:func:`kind_of` raises); create the folders."""
        kind_of(self.path)
        guard.published_path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.files.mkdir(parents=True, exist_ok=True)

    def stage(self, work_con: duckdb.DuckDBPyConnection, plan: PublicationPlan) -> StagedSnapshot:
        """Write ``plan`` as a complete snapshot file beside ``path`` (fsynced, not yet visible: every view
        with the work file's SQL, the vote tables' versions as views over their Parquet files, the small
        tables and the records copied) and record which files it names (:func:`record_files`, in the work
        file's transaction). A symbolic link at ``path`` stages beside the file it leads to (the link stays)."""
        staged = _write_snapshot(work_con, plan, self)
        try:
            record_files(work_con, staged)
        except BaseException:
            staged.discard()
            raise
        return staged

    def commit(self, staged: StagedSnapshot) -> None:
        """Rename the staged file over the readers' one (:meth:`StagedSnapshot.swap`: first the check that
        the file there is still this store's, ``guard.check_replaceable``)."""
        staged.swap()

    def discard(self, staged: StagedSnapshot) -> None:
        staged.discard()

    def prune(self, work_con: duckdb.DuckDBPyConnection, schema: str) -> list[str]:
        """Delete the Parquet files no kept snapshot names (:func:`prune_files`)."""
        return prune_files(work_con, schema, self)

    def open_reader(self, *, timeout_s: float = 0.0, memory_limit: str | None = None,
                    config: dict | None = None) -> duckdb.DuckDBPyConnection:
        """A read-only connection to the newest snapshot file (``reader.open_newest``: whatever this process
        holds open, waiting at most ``timeout_s`` for a process holding it read-write), its vote tables'
        files resolved against its folder."""
        return open_newest(str(self.path), timeout_s=timeout_s, memory_limit=memory_limit, config=config)


@dataclass
class StagedSnapshot:
    """A complete snapshot file beside the readers' one, not yet visible: :meth:`swap` makes it the
    live one (one rename), :meth:`discard` removes it."""

    temporary: Path
    target: Path
    publication_id: int | None
    #: version -> the name of the Parquet file its view reads (in ``SnapshotTarget.files``)
    files: dict[str, str] = field(default_factory=dict)
    #: refuses, right before the rename, a readers' file that is not this store's (:mod:`core.store.guard`)
    check: Callable[[], None] | None = None

    def swap(self) -> None:
        """Rename the staged file over the readers' file (its mode and group kept) and make the rename durable."""
        if self.check is not None:
            self.check()
        guard.prepare_rename(self.temporary, self.target)
        os.replace(self.temporary, self.target)
        _fsync_folder(self.target.parent)

    def discard(self) -> None:
        self.temporary.unlink(missing_ok=True)
        Path(f"{self.temporary}.wal").unlink(missing_ok=True)


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be opened for fsync
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _base(con: duckdb.DuckDBPyConnection, version: str) -> str:
    row = con.execute(f"SELECT coalesce(same_as, version) FROM {VERSIONS} WHERE version = ?", [version]).fetchone()
    return row[0] if row else version


def export_version(con: duckdb.DuckDBPyConnection, version: str, folder: Path) -> Path:
    """The Parquet file of ``version`` (a table of the versions schema: a store from before the vote
    tables were written as files), written once: an existing file is the same rows (a version is never
    rewritten under its name once published)."""
    return _write_parquet(con, version, folder)


def _write_parquet(con: duckdb.DuckDBPyConnection, version: str, folder: Path) -> Path:
    out = folder / f"{version}.parquet"
    if out.is_file():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{version}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    # row groups bounded in bytes need the rows' order free (it is: a version is a set of rows)
    (ordered,) = con.execute("SELECT current_setting('preserve_insertion_order')").fetchone()
    con.execute("SET preserve_insertion_order = false")
    try:
        con.execute(f"COPY (SELECT * FROM {quoted(VERSIONS_SCHEMA, version)}) TO {sql_string(str(tmp))} "
                    f"({PARQUET_OPTIONS})")
        _fsync_file(tmp)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:  # in a transaction the failure aborted, this fails too: the failure's own error is the one raised
        with contextlib.suppress(duckdb.Error):
            con.execute(f"SET preserve_insertion_order = {bool(ordered)}")
    return out


def _columns(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[str, str]]:
    return [(row[0], row[1]) for row in con.execute(f"DESCRIBE {sql}").fetchall()]


def _copy(con: duckdb.DuckDBPyConnection, sql: str, snap: duckdb.DuckDBPyConnection, schema: str,
          table: str) -> None:
    """Copy the rows of ``sql`` (on ``con``) into ``schema.table`` of ``snap``, with DuckDB's own types."""
    columns = ", ".join(f'"{name}" {kind}' for name, kind in _columns(con, sql))
    snap.execute(f"CREATE TABLE {quoted(schema, table)} ({columns})")
    rows = con.execute(sql).to_arrow_table()  # noqa: F841 - read by DuckDB below
    snap.execute(f"INSERT INTO {quoted(schema, table)} SELECT * FROM rows")


def files_of(con: duckdb.DuckDBPyConnection, target: SnapshotTarget) -> Callable[[str], tuple[str, ...] | None]:
    """What a plan (``targets.plan_publication``) shows of each version: a version stored as Parquet
    files (``versions.version_files``) as its files, relative to the store folder; a version of a vote
    table (``target.file_tables``) stored as a DuckDB table (a store from before) as its Parquet file,
    exported where it is not yet (:func:`export_version`); any other version None (copied)."""
    file_tables = target.file_tables if target.file_tables is not None else recorded_file_tables(con)

    def files(version: str) -> tuple[str, ...] | None:
        folder = version_files(con, version)
        if folder is not None:
            return (f"{folder}/{PART_GLOB}",)
        if version.partition("__")[0] not in file_tables:
            return None
        path = export_version(con, _base(con, version), target.files)
        return (f"{target.files.name}/{path.name}",)

    return files


def stage_snapshot(con: duckdb.DuckDBPyConnection, schema: str, target: SnapshotTarget) -> StagedSnapshot:
    """Write the snapshot of what ``con`` sees as live (inside a transaction: its uncommitted
    publication) to a temporary file beside ``target.path``, complete and fsynced
    (:meth:`SnapshotTarget.stage` of the plan ``targets.plan_publication`` makes)."""
    return target.stage(con, plan_publication(con, schema, files_of(con, target)))


def _write_snapshot(con: duckdb.DuckDBPyConnection, plan: PublicationPlan, target: SnapshotTarget) -> StagedSnapshot:
    """The snapshot file of ``plan`` (see :meth:`SnapshotTarget.stage`)."""
    path = guard.published_path(target.path)  # a symbolic link's file: the link stays
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path.parent, f".{path.name}.")
    _remove_stale_temporaries(target.files, ".")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    publications = guard.store_publications(con, plan.schema)
    staged = StagedSnapshot(tmp, path, plan.publication_id, check=lambda: guard.check_replaceable(
        target.path, target.files.parent / WORK_FILE, publications, plan.schema))
    store = target.files.parent
    # the files are named relative to the snapshot's folder: the snapshot moves with its store folder
    here = path.parent
    try:
        snap = duckdb.connect(str(tmp), config=search_path(str(path)))
        try:
            snap.execute(f'CREATE SCHEMA "{plan.schema}"')
            snap.execute(f'CREATE SCHEMA "{VERSIONS_SCHEMA}"')
            for version, files in plan.files.items():
                # relative to the snapshot's folder; a wildcard character in a folder's name matches only itself
                patterns = [f"{guard.literal_path(Path(os.path.relpath(store.resolve() / folder, here)).as_posix())}/{name}"
                            for folder, _, name in (file.rpartition("/") for file in files)]
                staged.files[version] = Path(files[0]).parts[1]  # its entry in the store's Parquet folder
                listed = ", ".join(sql_string(pattern) for pattern in patterns)
                snap.execute(f"CREATE VIEW {quoted(VERSIONS_SCHEMA, version)} AS "
                             f"SELECT * FROM read_parquet([{listed}])")
            for version in plan.copied:
                _copy(con, f"SELECT * FROM {quoted(VERSIONS_SCHEMA, version)}", snap, VERSIONS_SCHEMA, version)
            for schema, table in plan.records:
                _copy(con, f"SELECT * FROM {quoted(schema, table)}", snap, schema, table)
            snap.execute(f"CREATE TABLE {quoted(VERSIONS_SCHEMA, SNAPSHOT_MARKER)} AS SELECT "
                         f"{staged.publication_id or 'NULL'}::BIGINT AS publication_id, now() AS written_at, "
                         f"{sql_string(str(store.resolve()))} AS store")
            for _, sql in plan.views:
                snap.execute(sql)
            snap.execute("CHECKPOINT")
        finally:
            snap.close()
        _fsync_file(tmp)
    except BaseException:
        staged.discard()
        raise
    return staged


def recorded_file_tables(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """The tables whose versions earlier snapshots showed as Parquet files (:func:`record_files`): what a
    snapshot of the live publication written again (after a refusal, a failed load) shows the same way."""
    if not relation_exists(con, VERSIONS_SCHEMA, SNAPSHOT_FILES.rpartition(".")[2].strip('"')):
        return frozenset()
    return frozenset(version.partition("__")[0]
                     for (version,) in con.execute(f"SELECT DISTINCT version FROM {SNAPSHOT_FILES}").fetchall())


def record_files(con: duckdb.DuckDBPyConnection, staged: StagedSnapshot) -> None:
    """Record which Parquet files the publication's snapshot names (what :func:`prune_files` keeps)."""
    con.execute(SNAPSHOT_FILES_DDL)
    if staged.publication_id is None:
        return
    con.execute(f"DELETE FROM {SNAPSHOT_FILES} WHERE publication_id = ?", [staged.publication_id])
    for version, name in staged.files.items():
        con.execute(f"INSERT INTO {SNAPSHOT_FILES} VALUES (?, ?, ?)", [staged.publication_id, version, name])


def prune_files(con: duckdb.DuckDBPyConnection, schema: str, target: SnapshotTarget) -> list[str]:
    """Delete the Parquet files that neither the live publication, the ``keep_publications`` publications
    before it, nor the newest publication of each of the ``keep_revisions`` newest other revisions names;
    return their names."""
    if not target.files.is_dir() or not relation_exists(con, schema, PUBLICATIONS_TABLE):
        return []
    con.execute(SNAPSHOT_FILES_DDL)
    keep = {name for (name,) in con.execute(
        f"""WITH newest AS (SELECT revision, max(publication_id) AS publication_id
                            FROM {quoted(schema, PUBLICATIONS_TABLE)} GROUP BY revision),
                 kept AS (SELECT publication_id FROM newest ORDER BY publication_id DESC LIMIT ?),
                 held AS (SELECT publication_id FROM {quoted(schema, PUBLICATIONS_TABLE)}
                          ORDER BY publication_id DESC LIMIT ?)
            SELECT file FROM {SNAPSHOT_FILES}
            WHERE publication_id IN (SELECT publication_id FROM kept UNION SELECT publication_id FROM held)""",
        [int(target.keep_revisions) + 1, int(target.keep_publications) + 1]).fetchall()}
    if not keep:  # nothing recorded yet (a store from before the snapshot): delete nothing
        return []
    # a version the work file still holds keeps its files (one being made, one not yet published)
    keep |= {Path(files).name for (files,) in con.execute(
        f"SELECT files FROM {VERSIONS} WHERE files IS NOT NULL").fetchall()}
    removed = []
    for path in sorted(target.files.iterdir()):
        if path.name in keep or path.name.startswith("."):  # a hidden one: being written (or stale, below)
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.suffix == ".parquet":
            path.unlink(missing_ok=True)
        else:
            continue
        removed.append(path.name)
    con.execute(f"DELETE FROM {SNAPSHOT_FILES} WHERE file NOT IN (SELECT unnest(?))", [sorted(keep)])
    return removed


_TEMPORARY = re.compile(r"\.(\d+)\.[0-9a-f]{8}\.tmp(\.wal)?$")


def _remove_stale_temporaries(folder: Path, prefix: str) -> None:
    """Remove temporary files a killed process left (its pid, in the name, is gone)."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        match = _TEMPORARY.search(path.name)
        if not path.name.startswith(prefix) or not match:
            continue
        pid = int(match.group(1))
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        except PermissionError:
            pass


def snapshot_publication(path: Path, schema: str) -> int | None:
    """The live publication id of the snapshot at ``path`` (None: no file, or nothing published)."""
    if not path.is_file():
        return None
    con = duckdb.connect(str(path), read_only=True)
    try:
        live = live_publication(con, schema)
    finally:
        con.close()
    return live["publication_id"] if live else None


def kind_of(path: Path) -> str:
    """What the file at ``path`` is: ``missing``, ``empty`` (a DuckDB file with nothing in it),
    ``snapshot`` or ``legacy`` (a warehouse from before the snapshot: the pipeline worked in it).

    Raises
    ------
    NotAWarehouseError
        A file that is not a DuckDB database, or a database of something else: never replaced.
    """
    if not path.exists():
        return "missing"
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        damaged = corruption_error(str(path), exc)
        if damaged is not None:
            raise damaged from exc
        raise NotAWarehouseError(f"{path} is not a DuckDB warehouse ({exc}); nothing was written into it. Point "
                                 "ARENA_WAREHOUSE at a new file or at a warehouse") from exc
    try:
        check_is_warehouse(con, str(path))  # a database of something else: refused, with what it holds
        rows = con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT internal "
                           "UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    finally:
        con.close()
    if not rows:
        return "empty"
    if (VERSIONS_SCHEMA, "versions") in rows and (VERSIONS_SCHEMA, SNAPSHOT_MARKER) not in rows:
        return "legacy"
    return "snapshot"


class StoreMissingError(NotAWarehouseError):
    """The readers' snapshot has publications but its pipeline store is not where the settings say:
    a new store would start the publications over and replace the snapshot's history."""


def adopt_legacy(path: Path, work: Path) -> bool:
    """Make a warehouse from before the snapshot (the pipeline and its readers shared ``path``) the
    work file, in place and without a copy: checkpointed (its WAL merged), then hard-linked as
    ``work`` (renamed where the file system has no hard links). ``path`` keeps serving readers
    until the first snapshot replaces it. Returns whether it adopted one."""
    if work.exists():
        return False
    kind = kind_of(path)
    if kind == "snapshot" and snapshot_publication(path, "arena") is not None:
        raise StoreMissingError(
            f"{path} is a published snapshot, but its pipeline store {work.parent} (the work file and the vote "
            f"tables' Parquet files) is missing; nothing was written. Put the store folder back beside it (or "
            f"point ARENA_STORE_DIR at it), or move the snapshot away to start a new history")
    if kind != "legacy":
        return False
    con = duckdb.connect(str(path))
    try:
        con.execute("CHECKPOINT")
    finally:
        con.close()
    work.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(path, work)
    except OSError:
        os.replace(path, work)
    _fsync_folder(work.parent)
    return True


def sync_snapshot(con: duckdb.DuckDBPyConnection, schema: str, snapshot: SnapshotTarget) -> int | None:
    """Write the readers' snapshot of what the work file holds now (its live publication and its
    records: a refusal's or a failed load's), replacing the old one; return the live publication id.

    Used after a run that published nothing (the records changed, the publication did not) and to
    bring a snapshot level after a crash between a publication's COMMIT and its rename.
    """
    ensure_catalog(con, schema)  # a store from before gains the registry's columns (files)
    staged = stage_snapshot(con, schema, snapshot)
    snapshot.commit(staged)
    snapshot.prune(con, schema)
    return staged.publication_id
