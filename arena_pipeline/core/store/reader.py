"""The readers' entry: a connection that reads the newest publication of a snapshot, whatever this process holds open.

``duckdb.connect(path)`` in a process that already holds a connection to ``path`` reuses that
connection's database instance: it reads the publication the first connection opened (the old file,
renamed over since), not the newest one, for as long as any connection to the path stays open. A
fresh in-memory database that ATTACHes the file opens it anew: :func:`open_newest` does that, read-only,
and USEs the attached catalog so that ``arena.leaderboard`` resolves as in a direct connection (the
views' ``arena_versions.*`` resolve inside the attached catalog). The alias is fixed (:data:`ALIAS`), so
a file named like a schema (``arena.duckdb``) reads the same.
"""

from __future__ import annotations

import re

import duckdb

from arena_pipeline.constants import VERSIONS_SCHEMA
from arena_pipeline.core.store.warehouse import connect, sql_string

#: The catalog name the snapshot is attached as: no schema of a warehouse is called so.
ALIAS = "arena_snapshot"

#: The marker table of a snapshot (``core.store.snapshot.SNAPSHOT_MARKER``; its publication_id).
_MARKER = f'"{VERSIONS_SCHEMA}"."snapshot"'


def attach(path: str, settings: dict | None = None) -> duckdb.DuckDBPyConnection:
    """A new in-memory connection with the file at ``path`` attached read-only as :data:`ALIAS` and in use."""
    con = duckdb.connect(":memory:", config=dict(settings or {}))
    try:
        con.execute(f"ATTACH {sql_string(str(path))} AS {ALIAS} (READ_ONLY)")
        con.execute(f"USE {ALIAS}")
    except BaseException:
        con.close()
        raise
    return con


def open_newest(path: str, *, timeout_s: float = 0.0, memory_limit: str | None = None,
                config: dict | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the newest publication at ``path`` (the snapshot file as it is now),
    retrying for at most ``timeout_s`` while another process holds the file read-write.

    Raises
    ------
    WarehouseLockedError, WarehouseCorruptError
        As :func:`core.store.warehouse.connect` (a lock on a snapshot: a process opened it read-write).
    """
    return connect(str(path), read_only=True, timeout_s=timeout_s, memory_limit=memory_limit, config=config,
                   opener=lambda settings: attach(str(path), settings))


def held_publication(con: duckdb.DuckDBPyConnection) -> int | None:
    """The publication a connection to a snapshot reads (its marker), or None (not a snapshot, unreadable)."""
    try:
        row = con.execute(f"SELECT publication_id FROM {_MARKER}").fetchone()
    except duckdb.Error:
        return None
    return row[0] if row else None


#: DuckDB's words for a Parquet file that is gone (``IO Error: No files found that match the pattern``).
_GONE = re.compile(r"no files found|no such file|cannot open file", re.IGNORECASE)


def files_gone_message(con: duckdb.DuckDBPyConnection, exc: Exception, path: str) -> str | None:
    """One line for a query of a held connection whose vote tables' Parquet files were deleted since it
    opened (its publication older than the store keeps for readers); None for any other error."""
    if not _GONE.search(str(exc)):
        return None
    held = held_publication(con)
    which = f"publication {held}" if held is not None else "an older publication"
    return (f"this connection to {path} holds {which}, whose vote tables' Parquet files the pipeline has since "
            "deleted (it keeps them for Warehouse.keep_publications newer publications); reconnect to read the "
            "live publication (arena_pipeline.reader.connect opens the newest)")
