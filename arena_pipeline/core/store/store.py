"""The store: the work file, the publication targets readers read, and the one way in to each.

A :class:`Store` owns everything on disk the pipeline keeps: its *work file* (``work.duckdb`` in the
store folder, read-write, never opened by readers), the Parquet files of the vote tables, and the
publication targets readers read (``core/store/targets.py``: the snapshot file at ``ARENA_WAREHOUSE``,
and the DuckLake when one is configured). It hands out two kinds of connection, of two types a function
cannot confuse:

- :meth:`Store.work` yields a :class:`WorkConnection` to the work file. On leaving the block the store
  brings the targets level with the work file when they are not (:meth:`Store.bring_level`), compared
  with what the targets were last given (:data:`LEVEL`, in the work file: a run killed between its COMMIT
  and its rename left them behind): after a block that succeeded, when the live publication or what
  ``arena.dumps`` says of a dump changed (a dump fetched, loaded, rejected, failed); after a failure, when
  any record readers read changed (``records.RECORD_TABLES`` and the builds registry: a refusal, a failed
  check's results). The other records (the checks' results of a run that goes on, its build) reach the
  targets with the next of these, or the publication. No caller has to remember to.
- :func:`open_reader` (and :meth:`Store.reader`) is the one entry every reader of the pipeline opens a
  publication through: a :class:`ReaderConnection` to the newest publication of a target (the snapshot
  file, or the DuckLake), which runs queries and refuses every statement that writes.

:meth:`Store.publish` is the publish transaction (``core/store/publish.py``) on every target.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from arena_pipeline.constants import DUMPS_TABLE, PUBLICATIONS_TABLE, VERSIONS_SCHEMA
from arena_pipeline.core.store import errors, guard, lake, snapshot, warehouse
from arena_pipeline.core.store.connections import (
    FILES_FOLDER,
    ReaderConnection,
    WorkConnection,
    open_reader,
    require_work,
)
from arena_pipeline.core.store.publish import PublishReport, publish
from arena_pipeline.core.store.reader import open_newest
from arena_pipeline.core.store.records import BUILDS, RECORD_TABLES, live_publication
from arena_pipeline.core.store.targets import PublicationTarget
from arena_pipeline.core.store.versions import Build
from arena_pipeline.core.store.warehouse import quoted, relation_exists

#: The write-ahead log size past which a commit to the work file checkpoints it (DuckDB's ``checkpoint_threshold``).
#: A hold does not checkpoint on closing (``disable_checkpoint_on_shutdown``): a hold that wrote a few
#: registry rows and views (an unchanged re-run's) leaves them in the log, which the next open replays in a
#: few milliseconds, instead of rewriting ~2 MiB of the file and syncing it at each close; a larger write
#: checkpoints at its commit, so no open replays more than about this much.
WORK_CHECKPOINT = "1MiB"

#: What the targets were last given (work file; one row: the live publication, the digest of ``arena.dumps``
#: and :func:`records_digest`), written after they were: a crash before it leaves the targets one write
#: behind, never a write ahead.
LEVEL = quoted(VERSIONS_SCHEMA, "targets_level")


def _tables(con: duckdb.DuckDBPyConnection, schema: str) -> tuple[list[tuple[str, str]], set[tuple[str, str]]]:
    """The record tables and the builds registry, and which of them (and of :data:`LEVEL`) exist (one query)."""
    tables = [(schema, table) for table in RECORD_TABLES]
    tables.append(tuple(part.strip('"') for part in BUILDS.split(".")))
    found = set(con.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE schema_name IN (?, ?)",
                            [schema, VERSIONS_SCHEMA]).fetchall())
    return tables, found


def records_digest(con: duckdb.DuckDBPyConnection, schema: str, only: str | None = None) -> str:
    """What the records readers read hold (each record table and the builds registry: rows and a hash of
    them, in one query); equal digests, equal records. ``only``: that record table's part alone."""
    tables, found = _tables(con, schema)
    if only is not None:
        tables = [(schema, only)]
    present = [(i, s, t) for i, (s, t) in enumerate(tables) if (s, t) in found]
    digest = ["-"] * len(tables)
    if present:
        sql = " UNION ALL ".join(f"SELECT {i} AS i, count(*) AS n, coalesce(sum(hash(t)::HUGEINT), 0) AS h "
                                 f"FROM {quoted(s, t)} t" for i, s, t in present)
        for i, n, h in con.execute(sql).fetchall():
            digest[i] = f"{n}:{h}"
    return ";".join(digest)


def _state(con: duckdb.DuckDBPyConnection, schema: str) -> tuple[int | None, str, str]:
    """The work file as the targets show it: its live publication id, what ``arena.dumps`` holds (the
    outcome of each dump) and :func:`records_digest` (every record)."""
    digest = records_digest(con, schema)
    return _live_id(con, schema), digest.split(";")[list(RECORD_TABLES).index(DUMPS_TABLE)], digest


def _live_id(con: duckdb.DuckDBPyConnection, schema: str) -> int | None:
    """The live (newest) publication's id, or None."""
    return (con.execute(f"SELECT max(publication_id) FROM {quoted(schema, PUBLICATIONS_TABLE)}").fetchone()[0]
            if relation_exists(con, schema, PUBLICATIONS_TABLE) else None)


def _level(con: duckdb.DuckDBPyConnection, schema: str) -> tuple[int | None, str]:
    """The first two parts of :func:`_state` (the live publication id, what ``arena.dumps`` holds), in two
    small queries: what a block that succeeded is compared by."""
    return _live_id(con, schema), records_digest(con, schema, only=DUMPS_TABLE)


def _given(con: duckdb.DuckDBPyConnection, schema: str) -> tuple[int | None, str, str]:
    """What the targets were last given (:data:`LEVEL`); a store that never wrote them: an empty store's state."""
    if (VERSIONS_SCHEMA, LEVEL.rpartition(".")[2].strip('"')) in _tables(con, schema)[1]:
        row = con.execute(f"SELECT publication_id, outcome, records FROM {LEVEL}").fetchone()
        if row is not None:
            return row[0], row[1], row[2]
    return None, "-", ";".join("-" for _ in range(len(RECORD_TABLES) + 1))


def _mark_given(con: duckdb.DuckDBPyConnection, state: tuple[int | None, str, str]) -> None:
    con.execute(f"CREATE TABLE IF NOT EXISTS {LEVEL} (publication_id BIGINT, outcome VARCHAR, records VARCHAR)")
    con.execute(f"DELETE FROM {LEVEL}")
    con.execute(f"INSERT INTO {LEVEL} VALUES (?, ?, ?)", list(state))


@dataclass(frozen=True)
class Store:
    """The pipeline's store (see the module's docstring); ``resources.Warehouse`` makes one from its settings."""

    #: the readers' snapshot file (ARENA_WAREHOUSE)
    snapshot_path: Path
    #: the store folder: the work file and the Parquet files (ARENA_STORE_DIR)
    folder: Path
    schema: str = "arena"
    keep_revisions: int = 2
    keep_publications: int = 3
    retention: int = 5
    lock_timeout_s: float = 120.0
    memory_limit: str | None = None
    temp_directory: str | None = None
    #: DuckDB settings of every connection
    settings: dict = field(default_factory=dict)
    #: the DuckLake publications also go to (attach string, data path), or None
    lake_attach: str | None = None
    lake_data_path: str | None = None
    lake_cleanup_after_s: float = 3600.0

    @property
    def work_path(self) -> Path:
        """The work file (read-write, never opened by readers)."""
        return self.folder / snapshot.WORK_FILE

    @property
    def files_path(self) -> Path:
        """The folder of the vote tables' Parquet files (core/store/versions.py)."""
        return self.folder / FILES_FOLDER

    def snapshot_target(self, file_tables: Iterable[str] | None = None) -> snapshot.SnapshotTarget:
        """The snapshot file and the Parquet folder (``file_tables``: the vote tables, from the table
        catalogue; None: the tables earlier publications stored as files)."""
        return snapshot.SnapshotTarget(self.snapshot_path, self.files_path,
                                       None if file_tables is None else frozenset(file_tables),
                                       self.keep_revisions, self.keep_publications)

    def lake_target(self, file_tables: Iterable[str] | None = None) -> lake.LakeTarget | None:
        """The DuckLake publications also go to, or None."""
        if self.lake_attach is None:
            return None
        return lake.LakeTarget(self.lake_attach, self.lake_data_path, self.files_path,
                               None if file_tables is None else frozenset(file_tables), self.retention,
                               self.lake_cleanup_after_s)

    def targets(self, file_tables: Iterable[str] | None = None) -> list[PublicationTarget]:
        """Where publications go: the snapshot file, and the DuckLake when one is configured. A new target
        is one module implementing ``targets.PublicationTarget``, made here."""
        return [self.snapshot_target(file_tables), *filter(None, [self.lake_target(file_tables)])]

    def files_of(self, con: WorkConnection, file_tables: Iterable[str] | None = None
                 ) -> Callable[[str], tuple[str, ...] | None]:
        """The Parquet files of each version a publication shows (None: a small table, copied)."""
        return snapshot.files_of(con, self.snapshot_target(file_tables))

    # -- the work file ------------------------------------------------------------------------------------

    def prepare(self) -> Path:
        """The work file's path, its folder created; a warehouse from before the snapshot at the snapshot
        path becomes the work file in place (no copy), and readers get a snapshot at once; a file there
        that is not a warehouse is refused before anything is written (NotAWarehouseError)."""
        work = self.work_path
        if not work.exists() and snapshot.adopt_legacy(self.snapshot_path, work):  # raises for a non-warehouse
            con = warehouse.connect(str(work), timeout_s=self.lock_timeout_s, memory_limit=self.memory_limit,
                                    config=self.settings)
            try:
                self._sync(con)
            finally:
                con.close()
        work.parent.mkdir(parents=True, exist_ok=True)
        return work

    def _open_work(self) -> duckdb.DuckDBPyConnection:
        """The work file, opened read-write (a bounded wait for another process's lock) and checked."""
        guard.check_name(self.snapshot_path, self.work_path)  # before any file is made
        path = str(self.prepare())
        try:
            con = warehouse.connect(path, timeout_s=self.lock_timeout_s, memory_limit=self.memory_limit,
                                    config=self.settings)
        except warehouse.WarehouseCorruptError as exc:
            if type(exc) is not warehouse.WarehouseCorruptError:
                raise
            raise errors.damaged_work_file(path, self.snapshot_path, exc) from exc
        try:
            con.execute("PRAGMA disable_checkpoint_on_shutdown")  # WORK_CHECKPOINT
            con.execute(f"SET checkpoint_threshold = '{WORK_CHECKPOINT}'")
            warehouse.check_is_warehouse(con, path)
            # the readers' file is this store's to replace, or the run stops here (core/store/guard.py)
            guard.check_replaceable(self.snapshot_path, path, guard.store_publications(con, self.schema), self.schema,
                                    reread=False)
        except BaseException:
            con.close()
            raise
        return con

    @contextlib.contextmanager
    def work(self, *, warn: Callable[[str], None] | None = None, checkpoint: bool = False) -> Iterator[WorkConnection]:
        """A short-lived read-write connection to the work file; on leaving, the targets are brought level
        with what the block recorded (:meth:`bring_level`). After a failure the failure stays the error
        (a target that cannot be written is a note on it); ``warn``: a target that cannot be written after
        a block that succeeded is this line, not an error. ``checkpoint``: the block is a run's last write
        (the gate's), after which the work file is checkpointed: a run that ends leaves it whole, with no
        write-ahead log (a hold does not checkpoint on closing: :data:`WORK_CHECKPOINT`). DuckDB's errors are
        explained in one line (out of memory, a full disk, a damaged work file: ``core/store/errors.py``)."""
        con = self._open_work()
        path = str(self.work_path)
        work = WorkConnection(con, self.schema)
        try:
            try:
                yield work
            except BaseException as exc:
                with contextlib.suppress(duckdb.Error):  # what the failure left unfinished
                    con.execute("ROLLBACK")
                if (unsynced := self.bring_level(work, failed=True)) is not None:
                    exc.add_note(unsynced)
                raise
            if (unsynced := self.bring_level(work, failed=False, quiet=warn is not None)) is not None:
                warn(unsynced)
            if checkpoint:
                con.execute("CHECKPOINT")
        except (duckdb.Error, OSError) as exc:  # its cause in one line: out of memory, a full disk, damage
            damaged = warehouse.corruption_error(path, exc)
            if damaged is not None:
                raise errors.damaged_work_file(path, self.snapshot_path, exc) from exc
            limit = errors.explain(exc, memory_limit=self.memory_limit, temp_directory=self.temp_directory,
                                   store=self.folder)
            if limit is None:
                raise
            raise limit from exc
        finally:
            con.close()

    def bring_level(self, work: WorkConnection, *, failed: bool, quiet: bool = False) -> str | None:
        """Write the targets level with the work file when they are not (see the module's docstring): the
        live publication or ``arena.dumps`` differ from what the targets were last given (:data:`LEVEL`), or,
        ``failed``, any record. ``failed`` or ``quiet``: a target that cannot be written is returned as a
        line (the next run writes it), not raised."""
        try:
            given = _given(work.raw, self.schema)
            if (_state(work.raw, self.schema) == given) if failed else (_level(work.raw, self.schema) == given[:2]):
                return None
            self._sync(work.raw)
        except (duckdb.Error, OSError, RuntimeError) as exc:  # a LakeError is a RuntimeError
            if not (failed or quiet):
                raise
            return f"the readers' snapshot was not brought up to date ({type(exc).__name__}: {exc})"
        return None

    def _sync(self, con: duckdb.DuckDBPyConnection) -> None:
        """Give every target the work file's live publication and records as they are now (nothing else
        writes the work file meanwhile: this connection holds its lock)."""
        snapshot.sync_snapshot(con, self.schema, self.snapshot_target())
        if (target := self.lake_target()) is not None:
            lake.sync_lake(con, self.schema, target)
        _mark_given(con, _state(con, self.schema))

    def publish(self, work: WorkConnection, build: Build, chosen: dict[str, str], *,
                file_tables: Iterable[str] | None = None, **options: Any) -> PublishReport:
        """Publish ``chosen`` on every target in one transaction of the work file
        (:func:`core.store.publish.publish`; ``options``: its keyword arguments); the targets are then level."""
        require_work(work)
        report = publish(work.raw, self.schema, build, chosen, targets=self.targets(file_tables),
                         files_of=self.files_of(work.raw, file_tables), **options)
        _mark_given(work.raw, _state(work.raw, self.schema))
        return report

    def bring_readers_level(self) -> int | None:
        """Write the targets again when the work file's live publication is not the snapshot's: a run killed
        between its COMMIT and its rename. Returns the publication brought level, or None: level already,
        nothing published, a process holds the work file (a live run: it brings them level) or a target
        cannot be written (its error is the next run's). Never waits, never raises: the sensor and the
        schedule call it at every tick."""
        if not self.work_path.is_file():
            return None
        try:
            con = warehouse.connect(str(self.work_path), timeout_s=0, memory_limit=self.memory_limit,
                                    config=self.settings)
        except (duckdb.Error, RuntimeError):
            return None
        try:
            live = live_publication(con, self.schema)
            if live is None or live["publication_id"] == self._readers_publication():
                return None
            self._sync(con)
            return live["publication_id"]
        except (duckdb.Error, OSError, RuntimeError):
            return None
        finally:
            con.close()

    def _readers_publication(self) -> int | None:
        """The live publication id of the readers' snapshot as it is now (None: none, or unreadable)."""
        path = guard.published_path(self.snapshot_path)
        if not path.is_file():
            return None
        try:
            with open_newest(str(path)) as con:
                found = live_publication(con, self.schema)
        except (duckdb.Error, RuntimeError):
            return None
        return found["publication_id"] if found else None

    def check_readers_file(self) -> None:
        """Refuse, before a run does any work, a readers' file this store may not replace (core/store/guard.py):
        through a writing connection when the store exists, else by what the file holds.

        Raises
        ------
        NotAWarehouseError
            One line naming the file and what to do (ForeignFileError, WarehouseNameError, ...).
        """
        guard.check_name(self.snapshot_path, self.work_path)
        if self.work_path.exists():
            with self.work() as work:  # read again: a process holding it read-write is found here
                guard.check_replaceable(self.snapshot_path, self.work_path,
                                        guard.store_publications(work.raw, self.schema), self.schema)
                return
        snapshot.kind_of(guard.published_path(self.snapshot_path))  # a foreign file; a first run's adoption

    # -- readers -----------------------------------------------------------------------------------------

    def reader(self, *, timeout_s: float | None = None) -> ReaderConnection:
        """A read-only connection to the newest publication of the readers' snapshot (:func:`open_reader`,
        waiting at most ``timeout_s``, default ``lock_timeout_s``, for a process holding it read-write); an
        empty in-memory database while nothing is published: every relation is missing, as in a new store."""
        if not self.snapshot_path.is_file():
            return ReaderConnection(duckdb.connect(":memory:"))
        return open_reader(self.snapshot_path, timeout_s=self.lock_timeout_s if timeout_s is None else timeout_s,
                           memory_limit=self.memory_limit, config=self.settings)
