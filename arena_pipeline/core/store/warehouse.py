"""DuckDB writing: staging tables filled piecewise, then published together in one transaction."""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

import duckdb

if TYPE_CHECKING:  # Polars is imported where a frame is made: the CLI's read path does without it
    import polars as pl

STAGE_PREFIX = "_stage_"

R = TypeVar("R")


def sql_string(value: str) -> str:
    """``value`` as a SQL string literal (for a query that binds no Python value: binding makes DuckDB
    import pandas, which the CLI's read path avoids)."""
    return "'" + value.replace("'", "''") + "'"


class WarehouseLockedError(RuntimeError):
    """The DuckDB file stayed locked by another process for longer than the allowed wait."""


class WarehouseCorruptError(RuntimeError):
    """The DuckDB file is damaged (truncated, or a block's checksum does not match).

    Opening it again gives the same error, so callers must not retry (``retryable`` is False);
    the message says how to rebuild the last publication from the cached dump.
    """

    retryable = False


class NotAWarehouseError(WarehouseCorruptError):
    """The file is a DuckDB database of something else: nothing is written into it, never retried."""


#: The schemas of a warehouse (constants.SCHEMA and VERSIONS_SCHEMA): a database holding objects
#: in neither is some other database.
WAREHOUSE_SCHEMAS = ("arena", "arena_versions")


def check_is_warehouse(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Refuse a database that holds tables or views but none of a warehouse's schemas.

    An empty file is a new warehouse. Checked on every writing connection, before anything is
    written: a run pointed at some other database would otherwise write its tables beside that
    database's and fail only at publication.

    Raises
    ------
    NotAWarehouseError
        Naming the file and, for a start, what it holds.
    """
    rows = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT internal AND NOT temporary "
        "UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary"
    ).fetchall()
    if not rows or any(schema in WAREHOUSE_SCHEMAS for schema, _ in rows):
        return
    names = ", ".join(f"{schema}.{name}" for schema, name in sorted(rows)[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    raise NotAWarehouseError(
        f"{path} is a DuckDB database but not an arena_pipeline warehouse: it holds {len(rows)} "
        f"table(s) or view(s) ({names}{more}) and no schema {' or '.join(WAREHOUSE_SCHEMAS)}; nothing "
        f"was written into it. Point ARENA_WAREHOUSE (or the Warehouse resource's database) at a new "
        f"file or at a warehouse")


#: Lower-case fragments of DuckDB's messages for a damaged database file.
CORRUPTION_MARKERS: tuple[str, ...] = (
    "could not read enough bytes",
    "corrupt database file",
    "checksum",
)

REBUILD_COMMAND = ".venv/bin/dagster asset materialize -m arena_pipeline.definitions --select '*'"


def corruption_error(path: str, exc: Exception) -> WarehouseCorruptError | None:
    """A :class:`WarehouseCorruptError` for ``exc`` when it reports a damaged file, else None."""
    text = str(exc)
    if not any(marker in text.lower() for marker in CORRUPTION_MARKERS):
        return None
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return WarehouseCorruptError(
        f"the warehouse {path} is damaged ({first}); opening it again would fail the same way, so it "
        f"is not retried. The last publication can be rebuilt from the cached dump (a Hub revision "
        f"already in ARENA_CACHE_DIR is not downloaded again): move the file aside and re-run the "
        f"pipeline, e.g. `mv {path} {path}.damaged && ARENA_WAREHOUSE={path} {REBUILD_COMMAND}` "
        f"(add your usual --config-json); earlier dumps' history stays in the moved file"
    )


def search_path(path: str) -> dict[str, str]:
    """The setting that resolves the relative file paths of a database's views (the vote tables' Parquet
    files, named relative to the database file: core/store/snapshot.py) against the file's folder,
    whatever the process's working directory: ``{"file_search_path": <folder>}`` ({} in memory). A symbolic
    link's folder is that of the file it leads to (where a publication writes the snapshot: ``guard.published_path``)."""
    if not path or path == ":memory:" or path.startswith(("md:", "motherduck:")):
        return {}
    return {"file_search_path": os.path.dirname(os.path.realpath(path))}


def connect(path: str, *, read_only: bool = False, timeout_s: float = 60.0,
            memory_limit: str | None = None, config: dict | None = None,
            opener: Callable[[dict], duckdb.DuckDBPyConnection] | None = None) -> duckdb.DuckDBPyConnection:
    """Open the warehouse, retrying while another process holds its lock, for at most ``timeout_s``.

    ``opener(settings)``: how the file is opened (default ``duckdb.connect(path, read_only, settings)``;
    the readers' entry attaches it to an in-memory database instead, :mod:`core.store.reader`).

    ``memory_limit`` caps DuckDB's buffer pool (e.g. ``"4GB"``; DuckDB's default is 80% of RAM,
    which a long pipeline process would otherwise keep filled). Waits grow from 20 ms to at most 250 ms (with jitter), so a busy reader cannot hold a writer
    back for long after it lets go; the last attempt is made at the deadline.

    Raises
    ------
    WarehouseLockedError
        If the file is still locked at the deadline (the message gives the time waited).
    WarehouseCorruptError
        At once, never retried, if DuckDB reports the file damaged (:data:`CORRUPTION_MARKERS`:
        a truncated file, a block checksum mismatch); the message gives the
        command that rebuilds the last publication.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    delay = 0.02
    while True:
        try:
            settings = {"custom_user_agent": "arena_pipeline", **search_path(path), **(config or {})}
            if memory_limit:
                settings["memory_limit"] = memory_limit
            if opener is not None:
                return opener(settings)
            return duckdb.connect(path, read_only=read_only, config=settings)
        except duckdb.Error as exc:
            damaged = corruption_error(path, exc)
            if damaged is not None:
                raise damaged from exc
            # another process's lock; or, in this process, another thread's connection to the same file
            # being closed this instant (DuckDB then refuses to attach it again for a moment)
            passing = (isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()) or (
                isinstance(exc, duckdb.BinderException) and "unique file handle conflict" in str(exc).lower())
            if not passing:
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WarehouseLockedError(
                    f"{path} is locked by another process "
                    f"(waited {time.monotonic() - started:.1f} s of {timeout_s:g} s): {exc}"
                ) from exc
            time.sleep(min(delay * random.uniform(0.75, 1.25), remaining))
            delay = min(delay * 2, 0.25)


def quoted(schema: str, table: str) -> str:
    """``"schema"."table"`` with identifiers quoted."""
    return f'"{schema}"."{table}"'


def create_stage(con: duckdb.DuckDBPyConnection, schema: str, table: str,
                 columns: dict[str, pl.DataType]) -> str:
    """Create (or empty) the staging table for ``table`` with the given Polars schema; return its name."""
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    stage = quoted(schema, STAGE_PREFIX + table)
    create_empty(con, stage, columns, replace=True)
    return stage


def create_empty(con: duckdb.DuckDBPyConnection, target: str, columns: dict[str, pl.DataType],
                 replace: bool = False) -> None:
    """Create the empty table ``target`` (quoted) with the given Polars schema (``replace``: or empty it)."""
    import polars as pl

    empty = pl.DataFrame(schema=columns).to_arrow()  # noqa: F841 - read by DuckDB below
    con.execute(f"CREATE {'OR REPLACE ' if replace else ''}TABLE {target} AS SELECT * FROM empty")


def append(con: duckdb.DuckDBPyConnection, target: str, frame: pl.DataFrame) -> int:
    """Append a frame to the table ``target`` (quoted: a staging table); return the rows appended."""
    if frame.height == 0:
        return 0
    import polars as pl  # loaded already: the caller has a frame

    # Arrow string views are Polars' own string layout: handed over without a copy (the default
    # export copies every text into a large_string array first; same rows in DuckDB either way)
    arrow = frame.to_arrow(compat_level=pl.CompatLevel.newest())  # noqa: F841 - read by DuckDB below
    con.execute(f"INSERT INTO {target} SELECT * FROM arrow")
    return frame.height


def drop_stages(con: duckdb.DuckDBPyConnection, schema: str, tables: Iterable[str]) -> None:
    """Drop the staging tables of ``tables`` (a load that failed: nothing of it stays behind). Each is
    dropped on its own, and one that cannot be dropped does not keep the others."""
    for table in tables:
        with contextlib.suppress(duckdb.Error):
            con.execute(f"DROP TABLE IF EXISTS {quoted(schema, STAGE_PREFIX + table)}")


def swap_in_staged(con: duckdb.DuckDBPyConnection, schema: str, tables: Iterable[str]) -> None:
    """Swap every staging table in for its published table in one transaction.

    Readers see either all the old tables or all the new ones; a crash before COMMIT leaves
    the published tables as they were (the staging tables are rebuilt by the next run).
    """
    con.execute("BEGIN TRANSACTION")
    try:
        for table in tables:
            con.execute(f"DROP TABLE IF EXISTS {quoted(schema, table)}")
            con.execute(f'ALTER TABLE {quoted(schema, STAGE_PREFIX + table)} RENAME TO "{table}"')
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def write_table(con: duckdb.DuckDBPyConnection, schema: str, table: str, frame: pl.DataFrame) -> int:
    """Replace ``schema.table`` by ``frame`` atomically (stage, then publish); return its row count."""
    create_stage(con, schema, table, dict(frame.schema))
    append(con, quoted(schema, STAGE_PREFIX + table), frame)
    swap_in_staged(con, schema, [table])
    return frame.height


def write_table_with(con: duckdb.DuckDBPyConnection, schema: str, table: str, fill: Callable[[str], int]) -> int:
    """Replace ``schema.table`` by what ``fill(stage)`` creates inside DuckDB (stage, then publish).

    ``fill`` gets the quoted name of a staging table that does not exist, creates and fills it (say
    with ``CREATE TABLE ... AS SELECT``: the rows never pass through Python) and returns its rows.
    """
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    stage = quoted(schema, STAGE_PREFIX + table)
    con.execute(f"DROP TABLE IF EXISTS {stage}")
    rows = fill(stage)
    swap_in_staged(con, schema, [table])
    return rows


def write_tables_with(con: duckdb.DuckDBPyConnection, schema: str, tables: Iterable[str],
                      fill: Callable[[dict[str, str]], R]) -> R:
    """Replace the tables ``tables`` of ``schema`` together by what ``fill(stages)`` creates inside DuckDB.

    ``fill`` gets the quoted name of each table's staging table (``{table: stage}``; none exists yet),
    creates and fills them and returns what it made (say the rows per table); the staging tables are
    then swapped in together (:func:`swap_in_staged`: readers see all old tables or all new ones). A
    failure drops them (nothing of the fill stays behind) and is raised.
    """
    tables = list(tables)
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    drop_stages(con, schema, tables)
    try:
        made = fill({table: quoted(schema, STAGE_PREFIX + table) for table in tables})
        swap_in_staged(con, schema, tables)
    except BaseException:
        drop_stages(con, schema, tables)
        raise
    return made


def relation_exists(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> bool:
    """Whether ``schema.name`` is a table or a view.

    The names are compared in Python, not bound as query parameters: DuckDB imports pandas (~0.2 s)
    the first time a process binds a Python value, and the CLI's read path binds none otherwise.
    """
    return (schema, name) in con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()


@contextlib.contextmanager
def read_snapshot(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Reads inside one transaction: all of them see the same committed state (a publication swapped
    in meanwhile is seen entirely or not at all)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    finally:
        con.execute("COMMIT")


def read_frame(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pl.DataFrame:
    """Run a query and return a Polars frame (DuckDB's own ``.pl()``)."""
    return con.execute(sql, params or []).pl()


def stream_frames(con: duckdb.DuckDBPyConnection, sql: str, params: Iterable = (), batch_rows: int = 1 << 20
                  ) -> Iterator[pl.DataFrame]:
    """Run a query and return its rows as consecutive Polars frames of at most ``batch_rows`` rows, one empty
    frame of the query's schema when there are none: a caller holds a batch at a time (with the frames before
    it, if it keeps them). Another query on ``con`` ends the stream: a caller that runs one between two frames
    streams on a cursor (``con.cursor()``, its own connection)."""
    import polars as pl

    reader = con.execute(sql, list(params)).to_arrow_reader(batch_rows)
    empty = True
    for batch in reader:
        empty = False
        frame = pl.from_arrow(batch)
        del batch  # before the next one is fetched
        yield frame
    if empty:
        yield pl.from_arrow(reader.schema.empty_table())
