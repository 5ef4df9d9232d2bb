"""The two kinds of connection the store hands out, of two types a function cannot confuse, and the one
entry readers open a publication through (:func:`open_reader`); ``core/store/store.py`` says when each is
used."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

import duckdb

from arena_pipeline.core.store.reader import open_newest

#: Where the Parquet files of published vote-table versions live, inside the store folder.
FILES_FOLDER = "tables"

#: Statements a reader connection refuses: everything that writes to a database or changes what is attached.
WRITES = frozenset({
    duckdb.StatementType.INSERT, duckdb.StatementType.UPDATE, duckdb.StatementType.DELETE,
    duckdb.StatementType.CREATE, duckdb.StatementType.CREATE_FUNC, duckdb.StatementType.DROP,
    duckdb.StatementType.ALTER, duckdb.StatementType.ATTACH, duckdb.StatementType.DETACH,
    duckdb.StatementType.COPY_DATABASE, duckdb.StatementType.EXPORT, duckdb.StatementType.MERGE_INTO,
    duckdb.StatementType.VACUUM, duckdb.StatementType.ANALYZE,
})


class ReaderWriteError(duckdb.PermissionException):
    """A write attempted through a reader connection (readers read publications; only a run writes)."""


class _Wrapped:
    """A DuckDB connection wrapped: it behaves as the connection for what the wrapper does not define, and
    closes it on leaving a ``with`` block."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._con = con

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._con.close()


class WorkConnection(_Wrapped):
    """The pipeline's read-write connection to its work file; only :meth:`Store.work` makes one.

    It behaves as the DuckDB connection it wraps (every method is the connection's); a function that
    writes the store takes this type (:func:`require_work`), so a reader connection cannot be passed.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, schema: str):
        super().__init__(con)
        self._schema = schema

    @property
    def raw(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection itself (for a library that wants one)."""
        return self._con


class ReaderConnection(_Wrapped):
    """A read-only connection to one publication (:func:`open_reader`): it runs queries (``execute``,
    ``sql``, ``table``, ...) and refuses any statement that writes (:data:`WRITES`) with
    :class:`ReaderWriteError`; the publication it reads is attached read-only besides."""

    @staticmethod
    def _check(query: object) -> None:
        if not isinstance(query, str):  # a prepared statement or relation: parsed by DuckDB as given
            return
        for statement in duckdb.extract_statements(query):
            if statement.type in WRITES:
                raise ReaderWriteError(f"a reader connection does not write ({statement.type.name} refused): "
                                       "readers read the live publication, only a pipeline run writes the store")

    def execute(self, query: object, parameters: object = None) -> ReaderConnection:
        self._check(query)
        self._con.execute(query, parameters)
        return self

    def executemany(self, query: object, parameters: object = None) -> ReaderConnection:
        self._check(query)
        self._con.executemany(query, parameters)
        return self

    def sql(self, query: str, **options: Any) -> duckdb.DuckDBPyRelation | None:
        self._check(query)
        return self._con.sql(query, **options)

    query = sql

    def cursor(self) -> ReaderConnection:
        return ReaderConnection(self._con.cursor())

    def append(self, *args: Any, **kwargs: Any) -> None:
        raise ReaderWriteError("a reader connection does not write (append refused)")


def require_work(con: object) -> WorkConnection:
    """``con`` itself when it is the work file's connection; a TypeError for anything else (a reader's)."""
    if not isinstance(con, WorkConnection):
        raise TypeError(f"this writes the store: it takes the work file's connection (Store.work), not "
                        f"{type(con).__name__}")
    return con


def open_reader(path: str | os.PathLike[str] | None, *, ducklake: str | None = None, timeout_s: float = 0.0,
                memory_limit: str | None = None, config: dict | None = None) -> ReaderConnection:
    """The one entry readers open a publication through: the newest publication of the snapshot file at
    ``path`` (``reader.open_newest``, what ``SnapshotTarget.open_reader`` opens; DuckDB's error while there is
    none), or, with ``ducklake`` (an ARENA_DUCKLAKE attach string), of that DuckLake
    (``LakeTarget.open_reader``). Light on purpose: the CLI imports it and loads no array library."""
    if ducklake:
        from arena_pipeline.core.store.lake import LakeTarget  # the [lake] extra; Polars with it

        return ReaderConnection(LakeTarget(ducklake, None, Path(FILES_FOLDER)).open_reader(
            timeout_s=timeout_s, memory_limit=memory_limit, config=config))
    return ReaderConnection(open_newest(os.fspath(path or ""), timeout_s=timeout_s, memory_limit=memory_limit,
                                        config=config))
