"""The DuckLake target: the live publication, its records and its vote tables in a DuckLake on PostgreSQL.

A second place a publication goes, beside the readers' snapshot file (``core/store/snapshot.py``),
for readers on other machines: a DuckLake whose catalog is a PostgreSQL database (``ARENA_DUCKLAKE``,
an attach string ``ducklake:postgres:dbname=... host=...``) and whose data path is a folder or an
object-storage URL (``ARENA_DUCKLAKE_DATA_PATH``). Unset, nothing here runs.

The lake has the snapshot's layout, so every reader's query is the same: schema ``arena`` holds every
published view with the work file's SQL and the records (``publications``, ``dumps``,
``quality_results``); schema ``arena_versions`` the versions those views name (the live ones and the
ones the ``*_history`` views keep) and the version registry. A version is immutable under its name,
so it is written to the lake once, by the first publication that names it (a vote table's from its
Parquet file in the store, a small table from the work file), and dropped by the first one that no
longer does.

:class:`LakeTarget` is a ``core.store.targets.PublicationTarget``: ``publish()`` hands it the plan of the
publication inside the work file's transaction, beside the snapshot file's target.
One publication is **one DuckLake transaction** (:func:`stage_plan`, then :meth:`StagedLake.commit`):
new versions, the views re-pointed, the records replaced, the versions no longer named dropped, and a
commit message ``publication N`` whose extra info is ``{"publication_id": N, "revision": ...}``. So
each publication is one DuckLake snapshot (``arena_lake.snapshots()``): a reader sees all of it or
none of it, and ``ATTACH ... (SNAPSHOT_VERSION n)`` reads any kept one whole. Two writers at once:
DuckLake refuses the second commit that touches what the first changed (a transaction conflict:
:class:`LakeConflictError`); a writer whose publication is older than the lake's is refused before
anything is written (:class:`LakeAheadError`), as is one of the same publication id from another store
folder (the lake's marker records the store that wrote it). Retention (:func:`retain_snapshots`, right after the commit) expires the snapshots
older than the ``retention`` newest publications' and deletes their files once no reader could still
be scanning them (``cleanup_after_s``).

The extensions: ``ducklake`` and ``postgres_scanner`` are loaded from the ``duckdb-extension-*`` wheels
of the ``[lake]`` extra when installed (they are builds for one DuckDB version, which the extra pins),
else by name (``INSTALL ducklake; INSTALL postgres`` done once online, DuckDB's own repository).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from arena_pipeline.constants import PUBLICATIONS_TABLE, VERSIONS_SCHEMA
from arena_pipeline.core.store.records import BUILDS, VERSIONS
from arena_pipeline.core.store.snapshot import SNAPSHOT_MARKER, SnapshotTarget, _columns, files_of
from arena_pipeline.core.store.targets import PublicationPlan, plan_publication
from arena_pipeline.core.store.warehouse import quoted, sql_string

#: The name the lake is attached under, by the pipeline and by the recipe of docs/reading.md.
ALIAS = "arena_lake"
#: DuckDB extension -> the wheel (``[lake]`` extra) that ships its build.
EXTENSIONS = {"postgres_scanner": "duckdb_extension_postgres_scanner", "ducklake": "duckdb_extension_ducklake"}
#: Who the lake's snapshots name as their author.
AUTHOR = "arena-pipeline"


class LakeError(RuntimeError):
    """The lake cannot be attached or written (its extensions, its catalog, its data path)."""


class LakeConflictError(LakeError):
    """Another writer committed a publication to the lake meanwhile; nothing of this one is in the lake."""


class LakeAheadError(LakeError):
    """The lake shows a newer publication than the one being written (another store publishes to it)."""


@dataclass(frozen=True)
class LakeTarget:
    """Where a publication goes besides the snapshot: the DuckLake, and the store's Parquet folder
    its vote tables are read from."""

    #: the DuckLake attach string, e.g. ``ducklake:postgres:dbname=arena host=127.0.0.1 user=arena``
    attach: str
    #: the lake's data path (a folder or an object-storage URL); None: the one the catalog records
    data_path: str | None
    #: the store's folder of the vote tables' Parquet files (``SnapshotTarget.files``)
    files: Path
    #: published tables stored as Parquet files (as ``SnapshotTarget.file_tables``); None: as recorded
    file_tables: frozenset[str] | None = None
    #: how many publications keep their DuckLake snapshot (time travel); older ones are expired
    retention: int = 5
    #: files of expired snapshots are deleted once they were scheduled this long ago (a reader's scan)
    cleanup_after_s: float = 3600.0
    #: the target's name (``targets.PublicationTarget``)
    name: str = "ducklake"

    def prepare(self) -> None:
        """Attach the lake once (creating its catalog in the database on first use): a missing extension,
        an unreachable server or a database that is not a DuckLake fail here, before any work."""
        connect_lake(self.attach, self.data_path).close()

    def stage(self, work_con: duckdb.DuckDBPyConnection, plan: PublicationPlan) -> StagedLake:
        """``plan`` written into an open DuckLake transaction (:func:`stage_plan`)."""
        return stage_plan(work_con, plan, self)

    def commit(self, staged: StagedLake) -> None:
        """Commit the lake's transaction: one DuckLake snapshot (:meth:`StagedLake.commit`); then, on the same
        connection, retention (:func:`retain_snapshots`: a second attach would cost about a second)."""
        staged.commit(retain=self)

    def discard(self, staged: StagedLake) -> None:
        staged.discard()

    def prune(self, work_con: duckdb.DuckDBPyConnection, schema: str) -> list[str]:
        """Nothing: retention ran with :meth:`commit` (the expired snapshots are ``StagedLake.expired``)."""
        return []

    def open_reader(self, *, timeout_s: float = 0.0, memory_limit: str | None = None,
                    config: dict | None = None) -> duckdb.DuckDBPyConnection:
        """A connection with the lake attached read-only and in use (:func:`connect_lake`; a catalog server
        has no file lock to wait for, and the lake's reads take DuckDB's own settings)."""
        return connect_lake(self.attach, read_only=True)


def extension_file(name: str) -> Path | None:
    """The build of DuckDB extension ``name`` a ``duckdb-extension-*`` wheel ships for the running
    DuckDB, or None (no such wheel, or one for another DuckDB version)."""
    spec = importlib.util.find_spec(EXTENSIONS[name])
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
        if path.is_file():
            return path
    return None


def load_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """Load ``postgres_scanner`` and ``ducklake`` into ``con``: the wheels' builds, else DuckDB's installed ones.

    Raises
    ------
    LakeError
        Neither is available, with how to install them.
    """
    for name in EXTENSIONS:
        path = extension_file(name)
        try:
            con.execute(f"LOAD {sql_string(str(path))}" if path else f"LOAD {name}")
        except duckdb.Error as exc:
            raise LakeError(
                f"the DuckDB extension {name} is not available for DuckDB {duckdb.__version__} ({exc}); install "
                "the [lake] extra (pip install 'arena_pipeline[lake]': DuckDB 1.5.5 and its extension wheels), or, "
                "online, run INSTALL ducklake; INSTALL postgres once in DuckDB") from exc


def connect_lake(attach: str, data_path: str | None = None, *, read_only: bool = False,
                 config: dict | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the lake attached as :data:`ALIAS` and in use (``USE``): the
    published layout's names (``arena.leaderboard``, ``arena_versions.<version>``) are the lake's.

    Raises
    ------
    LakeError
        The extensions are missing or the lake cannot be attached (its message kept).
    """
    con = duckdb.connect(":memory:", config=config or {})
    try:
        load_extensions(con)
        # no data inlined into the catalog: every table a Parquet file of the data path, the catalog metadata only
        options = ([f"DATA_PATH {sql_string(data_path)}"] if data_path and not read_only else []) + (
            [] if read_only else ["DATA_INLINING_ROW_LIMIT 0"]) + (
            ["READ_ONLY"] if read_only else [])
        con.execute(f"ATTACH {sql_string(attach if attach.startswith('ducklake:') else 'ducklake:' + attach)} "
                    f"AS {ALIAS}" + (f" ({', '.join(options)})" if options else ""))
        con.execute(f"USE {ALIAS}")
    except duckdb.Error as exc:
        con.close()
        reason = _redacted(str(exc).strip().splitlines()[0])
        raise LakeError(f"cannot attach the DuckLake {_redacted(attach)}: {reason}") from None
    except BaseException:
        con.close()
        raise
    return con


#: A libpq ``password=...`` value (bare or quoted), in an attach string or in an error quoting it.
_PASSWORD = re.compile(r"(password\s*=\s*)('[^']*'|[^\s\"']+)", re.IGNORECASE)


def _redacted(text: str) -> str:
    """``text`` with every ``password=...`` value replaced by ``***`` (it goes into messages and logs)."""
    return _PASSWORD.sub(r"\1***", text)


def _relations(lk: duckdb.DuckDBPyConnection, schema: str) -> dict[str, str]:
    """The lake's tables and views of ``schema``: name -> ``TABLE`` or ``VIEW``."""
    rows = lk.execute(
        "SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE database_name = ? AND schema_name = ? "
        "UNION ALL SELECT view_name, 'VIEW' FROM duckdb_views() WHERE database_name = ? AND schema_name = ?",
        [ALIAS, schema, ALIAS, schema]).fetchall()
    return dict(rows)


def _replace_table(con: duckdb.DuckDBPyConnection, sql: str, lk: duckdb.DuckDBPyConnection, schema: str,
                   table: str, existing: dict[str, str]) -> None:
    """``schema.table`` of the lake replaced by the rows of ``sql`` on ``con`` (the work file), with its types."""
    if table in existing:
        lk.execute(f"DROP {existing[table]} {quoted(schema, table)}")
    columns = ", ".join(f'"{name}" {kind}' for name, kind in _columns(con, sql))
    lk.execute(f"CREATE TABLE {quoted(schema, table)} ({columns})")
    rows = con.execute(sql).fetch_record_batch()  # noqa: F841 - read by DuckDB below, a batch at a time
    lk.execute(f"INSERT INTO {quoted(schema, table)} SELECT * FROM rows")


def lake_publication(lk: duckdb.DuckDBPyConnection) -> int | None:
    """The publication the lake shows (its marker), or None (a new lake)."""
    if SNAPSHOT_MARKER not in _relations(lk, VERSIONS_SCHEMA):
        return None
    row = lk.execute(f"SELECT publication_id FROM {quoted(VERSIONS_SCHEMA, SNAPSHOT_MARKER)}").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def lake_store(lk: duckdb.DuckDBPyConnection) -> str | None:
    """The store folder whose publication the lake shows (its marker), or None (a new lake)."""
    if SNAPSHOT_MARKER not in _relations(lk, VERSIONS_SCHEMA):
        return None
    row = lk.execute(f"SELECT store FROM {quoted(VERSIONS_SCHEMA, SNAPSHOT_MARKER)}").fetchone()
    return None if row is None else row[0]


@dataclass
class StagedLake:
    """A publication written into an open DuckLake transaction: :meth:`commit` makes it the lake's
    newest snapshot (all of it at once), :meth:`discard` leaves the lake as it was."""

    connection: duckdb.DuckDBPyConnection
    publication_id: int | None
    #: versions the transaction wrote to the lake, and dropped from it
    written: list[str]
    dropped: list[str]
    #: the lake's snapshots retention expired after the commit
    expired: list[int] = field(default_factory=list)

    def commit(self, retain: LakeTarget | None = None) -> None:
        """Commit the transaction (one DuckLake snapshot), then with ``retain`` apply its retention
        (:func:`retain_snapshots`, the expired snapshots in :attr:`expired`), and close the connection.

        Raises
        ------
        LakeConflictError
            Another writer committed to the lake meanwhile (nothing of this publication is in it).
        """
        try:
            self.connection.execute("COMMIT")
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):
                self.connection.execute("ROLLBACK")
            conflict = "conflict" in str(exc).lower()
            raise (LakeConflictError if conflict else LakeError)(
                f"publication {self.publication_id} was not committed to the DuckLake"
                + (" (another writer committed to it meanwhile)" if conflict else "")
                + f"; the lake is unchanged: {str(exc).strip().splitlines()[-1]}") from exc
        else:
            if retain is not None:
                self.expired = retain_snapshots(self.connection, retain)[0]
        finally:
            self.connection.close()

    def discard(self) -> None:
        """Roll the transaction back and close the connection."""
        with contextlib.suppress(duckdb.Error):
            self.connection.execute("ROLLBACK")
        self.connection.close()


def stage_lake(con: duckdb.DuckDBPyConnection, schema: str, target: LakeTarget) -> StagedLake:
    """:func:`stage_plan` of what ``con`` (the work file) shows as live: its plan made here, the vote
    tables' Parquet files as the snapshot's plan names them (``snapshot.files_of``: only its folder of
    files and its file tables are read, not its path)."""
    store = SnapshotTarget(target.files.parent, target.files, target.file_tables)
    files = files_of(con, store)
    return stage_plan(con, plan_publication(con, schema, files), target)


def stage_plan(con: duckdb.DuckDBPyConnection, plan: PublicationPlan, target: LakeTarget) -> StagedLake:
    """Write ``plan`` (what ``con``, the work file, shows; inside its publishing transaction) into a new
    DuckLake transaction, not yet committed: the versions its views name that the lake lacks, every view
    with the work file's SQL, the records, and the drop of the versions nothing names any more.

    A vote table's version is read from its Parquet files (relative to the store folder) into a lake table
    named after its file (the version that wrote it: a version reusing another's file is a view of that
    table, no data copied); a small table's version is copied from the work file.

    Raises
    ------
    LakeAheadError
        The lake shows a newer publication than the plan's (nothing written).
    LakeError
        The lake cannot be attached.
    """
    schema, publication_id = plan.schema, plan.publication_id
    store = target.files.parent
    lk = connect_lake(target.attach, target.data_path)
    staged = StagedLake(lk, publication_id, [], [])
    try:
        lk.execute("BEGIN TRANSACTION")
        for name in (schema, VERSIONS_SCHEMA):
            lk.execute(f'CREATE SCHEMA IF NOT EXISTS "{name}"')
        shown, owner = lake_publication(lk), lake_store(lk)
        if shown is not None and ((publication_id or 0) < shown
                                  or (publication_id == shown and owner != str(store.resolve()))):
            raise LakeAheadError(
                f"the DuckLake {_redacted(target.attach)} shows publication {shown} of the store {owner}, not older "
                f"than this store's {publication_id} ({store.resolve()}): another store publishes to it; nothing "
                "was written to the lake")
        stored = _relations(lk, VERSIONS_SCHEMA)
        needed = _write_versions(con, lk, plan, store, stored, staged)
        present = _relations(lk, schema)
        queries = dict(lk.execute("SELECT view_name, sql FROM duckdb_views() WHERE database_name = ? AND "
                                  "schema_name = ?", [ALIAS, schema]).fetchall())
        for name, sql in plan.views:  # the work file's SQL, which names arena_versions.<version>: the lake's
            if present.get(name) == "VIEW" and _query(queries.get(name, "")) == _query(sql):
                continue  # the same query (a re-rank re-points the boards, not the vote tables)
            if present.get(name) == "TABLE":
                lk.execute(f"DROP TABLE {quoted(schema, name)}")
            lk.execute(sql.replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1))
        for rschema, table in plan.records:
            _replace_table(con, f"SELECT * FROM {quoted(rschema, table)}", lk, rschema, table,
                           present if rschema == schema else stored)
        published = {name for name, _ in plan.views} | {t for s_, t in plan.records if s_ == schema}
        for name in sorted(set(present) - published):  # what the work file no longer publishes
            lk.execute(f"DROP {present[name]} {quoted(schema, name)}")
        registry = {r.rpartition(".")[2].strip('"') for r in (BUILDS, VERSIONS)} | {SNAPSHOT_MARKER}
        for name, kind in sorted(stored.items(), key=lambda item: item[1] != "VIEW"):  # views before tables
            if name not in needed and name not in registry:
                lk.execute(f"DROP {kind} {quoted(VERSIONS_SCHEMA, name)}")
                staged.dropped.append(name)
        lk.execute(f"CREATE OR REPLACE TABLE {quoted(VERSIONS_SCHEMA, SNAPSHOT_MARKER)} AS SELECT "
                   f"{publication_id or 'NULL'}::BIGINT AS publication_id, now() AS written_at, "
                   f"{sql_string(str(store.resolve()))} AS store")
        revision = con.execute(f"SELECT revision FROM {quoted(schema, PUBLICATIONS_TABLE)} WHERE publication_id = "
                               f"{int(publication_id)}").fetchone() if publication_id is not None else None
        info = {"publication_id": publication_id, "revision": revision[0] if revision else None}
        lk.execute(f"CALL {ALIAS}.set_commit_message({sql_string(AUTHOR)}, "
                   f"{sql_string(f'publication {publication_id}')}, extra_info => {sql_string(json.dumps(info))})")
    except BaseException:
        staged.discard()
        raise
    return staged


def _write_versions(con: duckdb.DuckDBPyConnection, lk: duckdb.DuckDBPyConnection, plan: PublicationPlan,
                    store: Path, stored: dict[str, str], staged: StagedLake) -> set[str]:
    """Write into the lake the versions ``plan`` names that it lacks (``stored``: the lake's versions, kept
    up to date): a vote table's from its Parquet files, once per file set; a small table's copied from the
    work file ``con``. Returns every version name the publication needs (with the vote tables' stored ones)."""
    needed = set(plan.versions)
    for version, files in plan.files.items():
        base = stored_name(files, version)
        needed.add(base)
        if base not in stored:  # a version is the same rows under its name: written once
            listed = ", ".join(sql_string(str((store / name).resolve())) for name in files)
            lk.execute(f"CREATE TABLE {quoted(VERSIONS_SCHEMA, base)} AS SELECT * FROM read_parquet([{listed}])")
            stored[base] = "TABLE"
            staged.written.append(base)
        if version not in stored:
            lk.execute(f"CREATE VIEW {quoted(VERSIONS_SCHEMA, version)} AS "
                       f"SELECT * FROM {quoted(VERSIONS_SCHEMA, base)}")
            stored[version] = "VIEW"
            staged.written.append(version)
    for version in plan.copied:
        if version not in stored:
            _replace_table(con, f"SELECT * FROM {quoted(VERSIONS_SCHEMA, version)}", lk, VERSIONS_SCHEMA,
                           version, stored)
            stored[version] = "TABLE"
            staged.written.append(version)
    return needed


def stored_name(files: tuple[str, ...], version: str) -> str:
    """The lake table a vote table's version is stored in: named after its files, so that a version reusing
    another's files (``same_as``) is a view of the same table. One file ``tables/<name>.parquet``: ``<name>``
    (the version that exported it); a folder's part files ``<folder>/part-*.parquet``: the folder's name;
    anything else: the version itself."""
    if len(files) != 1:
        return version
    path = Path(files[0])
    return path.parent.name if any(c in path.name for c in "*?[") else path.stem


def _query(view_sql: str) -> str:
    """A view's query, without ``CREATE VIEW <name>`` (DuckLake stores the name unqualified)."""
    return view_sql[view_sql.find(" AS "):].strip().rstrip(";")


def lake_snapshots(lk: duckdb.DuckDBPyConnection) -> list[tuple[int, int | None]]:
    """The lake's snapshots, oldest first: (snapshot id, the publication id its commit names, or None)."""
    rows = lk.execute(f"SELECT snapshot_id, commit_extra_info FROM {ALIAS}.snapshots() ORDER BY snapshot_id").fetchall()
    out = []
    for snapshot_id, extra in rows:
        try:
            publication_id = json.loads(extra).get("publication_id") if extra else None
        except (ValueError, AttributeError):
            publication_id = None
        out.append((int(snapshot_id), None if publication_id is None else int(publication_id)))
    return out


def prune_lake(target: LakeTarget) -> tuple[list[int], int]:
    """:func:`retain_snapshots` on a connection of its own."""
    lk = connect_lake(target.attach, target.data_path)
    try:
        return retain_snapshots(lk, target)
    finally:
        lk.close()


def retain_snapshots(lk: duckdb.DuckDBPyConnection, target: LakeTarget) -> tuple[list[int], int]:
    """Retention on ``lk`` (the lake attached for writing): expire the snapshots older than the newest
    snapshot of the ``target.retention``-th newest publication, then delete the files scheduled for
    deletion more than ``target.cleanup_after_s`` ago. Returns the expired snapshot ids and the number
    of files deleted."""
    snapshots = lake_snapshots(lk)
    newest = {}  # publication id -> its newest snapshot (a publication's records may be written again)
    for snapshot_id, publication_id in snapshots:
        if publication_id is not None:
            newest[publication_id] = snapshot_id
    kept = sorted(newest, reverse=True)[:max(int(target.retention), 1)]
    if not kept:
        return [], 0
    oldest_kept = newest[kept[-1]]
    expire = [s for s, _ in snapshots if s < oldest_kept]
    if expire:
        lk.execute(f"CALL ducklake_expire_snapshots({sql_string(ALIAS)}, versions => {expire})")
    deleted = lk.execute(
        f"CALL ducklake_cleanup_old_files({sql_string(ALIAS)}, older_than => now() - "
        f"INTERVAL '{float(target.cleanup_after_s)} seconds')").fetchall()
    return expire, len(deleted)


def sync_lake(con: duckdb.DuckDBPyConnection, schema: str, target: LakeTarget) -> int | None:
    """Write the lake level with what the work file holds now (its live publication and its records: a
    refusal's or a failed load's) in one transaction, as :func:`core.store.snapshot.sync_snapshot` does
    for the snapshot file; return the live publication id."""
    staged = stage_lake(con, schema, target)
    target.commit(staged)
    target.prune(con, schema)
    return staged.publication_id


def lake_disk_bytes(data_path: str) -> int:
    """Bytes of the files under a local data path (what the lake's Parquet files take)."""
    total = 0
    for root, _, files in os.walk(data_path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(root, name))
    return total
