"""Versioned tables per dump revision, the dump history, and the one-transaction publication of a dump.

Every table computed from a dump is written to ``arena_versions."<table>__<revision key>"``. The
names users query, ``arena.<table>``, are views; publishing a revision re-points every view in
one transaction, so a reader sees all tables of one dump, never a mix, never a half-written table.
A run killed at any moment leaves the views on the last published revision.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field

import duckdb

from arena_pipeline.constants import DUMPS_TABLE, VERSIONS_SCHEMA
from arena_pipeline.core.warehouse import quoted, read_frame, write_table

DUMPS_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    revision VARCHAR PRIMARY KEY,
    source VARCHAR,
    source_kind VARCHAR,
    requested_revision VARCHAR,
    first_seen TIMESTAMP,
    files JSON,
    rows BIGINT,
    status VARCHAR,
    status_detail VARCHAR,
    updated_at TIMESTAMP,
    published_at TIMESTAMP
)
"""

STATUSES = ("fetched", "loaded", "failed", "published", "superseded")


def revision_key(revision: str) -> str:
    """A short, identifier-safe key for a revision: 12 characters of a sha, or the local fingerprint."""
    if re.fullmatch(r"[0-9a-f]{40}", revision):
        return revision[:12]
    key = re.sub(r"[^0-9A-Za-z]+", "_", revision).strip("_").lower()
    if not key:
        raise ValueError(f"revision {revision!r} has no usable characters")
    return key[:40]


def versioned_name(table: str, revision: str) -> str:
    """The unquoted name of ``table`` for ``revision`` inside the versions schema."""
    return f"{table}__{revision_key(revision)}"


def versioned(table: str, revision: str) -> str:
    """The quoted, schema-qualified name of ``table`` for ``revision``."""
    return quoted(VERSIONS_SCHEMA, versioned_name(table, revision))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def ensure_dumps_table(con: duckdb.DuckDBPyConnection, schema: str) -> str:
    """Create ``schema.dumps`` if missing; return its quoted name."""
    con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    name = quoted(schema, DUMPS_TABLE)
    con.execute(DUMPS_DDL.format(table=name))
    return name


def record_dump(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    *,
    revision: str,
    status: str,
    source: str | None = None,
    source_kind: str | None = None,
    requested_revision: str | None = None,
    files: list[dict] | None = None,
    rows: int | None = None,
    detail: str | None = None,
) -> None:
    """Insert or update the history row of ``revision`` (fields left None keep their value)."""
    if status not in STATUSES:
        raise ValueError(f"unknown dump status {status!r}; expected one of {STATUSES}")
    name = ensure_dumps_table(con, schema)
    now = _now()
    con.execute(
        f"""
        INSERT INTO {name} (revision, source, source_kind, requested_revision, first_seen, files, rows,
                            status, status_detail, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (revision) DO UPDATE SET
            source = COALESCE(excluded.source, source),
            source_kind = COALESCE(excluded.source_kind, source_kind),
            requested_revision = COALESCE(excluded.requested_revision, requested_revision),
            files = COALESCE(excluded.files, files),
            rows = COALESCE(excluded.rows, rows),
            status = excluded.status,
            status_detail = excluded.status_detail,
            updated_at = excluded.updated_at
        """,
        [revision, source, source_kind, requested_revision, now,
         json.dumps(files) if files is not None else None, rows, status, detail, now],
    )


def published_revision(con: duckdb.DuckDBPyConnection, schema: str) -> str | None:
    """The revision the ``schema`` views currently show, or None before the first publication."""
    exists = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?", [schema, DUMPS_TABLE]
    ).fetchone()[0]
    if not exists:
        return None
    row = con.execute(
        f"SELECT revision FROM {quoted(schema, DUMPS_TABLE)} WHERE status = 'published' "
        "ORDER BY published_at DESC LIMIT 1"
    ).fetchone()
    return row[0] if row else None


def version_exists(con: duckdb.DuckDBPyConnection, table: str, revision: str) -> bool:
    """Whether ``table`` has been written for ``revision``."""
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?",
        [VERSIONS_SCHEMA, versioned_name(table, revision)],
    ).fetchone()[0])


@dataclass
class PublishReport:
    """What a publication changed."""

    revision: str
    previous: str | None
    views: list[str] = field(default_factory=list)
    history_views: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def _kept_revisions(con: duckdb.DuckDBPyConnection, schema: str, retention: int) -> list[str]:
    rows = con.execute(
        f"SELECT revision FROM {quoted(schema, DUMPS_TABLE)} WHERE status IN ('published', 'superseded') "
        "AND published_at IS NOT NULL ORDER BY published_at DESC"
    ).fetchall()
    return [r[0] for r in rows[:retention]]


def publish(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    revision: str,
    tables: list[str],
    *,
    history_tables: tuple[str, ...] = (),
    retention: int = 5,
) -> PublishReport:
    """Point every ``schema.<table>`` view at ``revision``'s tables, in one transaction.

    ``history_tables`` additionally get a ``schema.<table>_history`` view: the union of that table
    over the ``retention`` most recently published revisions (each row carrying its revision).
    Versioned tables of revisions that fall out of retention are dropped afterwards, except those
    of the published revision.

    Raises
    ------
    LookupError
        If a table has not been written for ``revision`` (nothing is changed then).
    """
    missing = [t for t in tables if not version_exists(con, t, revision)]
    if missing:
        raise LookupError(f"cannot publish {revision}: not written yet: {', '.join(missing)}")
    ensure_dumps_table(con, schema)
    report = PublishReport(revision=revision, previous=published_revision(con, schema))
    now = _now()
    con.execute("BEGIN TRANSACTION")
    try:
        for table in tables:
            con.execute(f"CREATE OR REPLACE VIEW {quoted(schema, table)} AS SELECT * FROM {versioned(table, revision)}")
            report.views.append(f"{schema}.{table}")
        dumps = quoted(schema, DUMPS_TABLE)
        con.execute(f"UPDATE {dumps} SET status = 'superseded', updated_at = ? WHERE status = 'published'", [now])
        con.execute(
            f"UPDATE {dumps} SET status = 'published', status_detail = NULL, published_at = ?, updated_at = ? "
            "WHERE revision = ?",
            [now, now, revision],
        )
        if con.execute(f"SELECT count(*) FROM {dumps} WHERE revision = ?", [revision]).fetchone()[0] == 0:
            con.execute(
                f"INSERT INTO {dumps} (revision, first_seen, status, updated_at, published_at) VALUES (?, ?, 'published', ?, ?)",
                [revision, now, now, now],
            )
        kept = _kept_revisions(con, schema, retention)
        for table in history_tables:
            parts = [f"SELECT * FROM {versioned(table, rev)}" for rev in kept if version_exists(con, table, rev)]
            con.execute(f"CREATE OR REPLACE VIEW {quoted(schema, table + '_history')} AS "
                        + " UNION ALL BY NAME ".join(parts))
            report.history_views.append(f"{schema}.{table}_history")
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    report.dropped = drop_old_versions(
        con, published=revision, kept=set(_kept_revisions(con, schema, retention)), history_tables=history_tables
    )
    return report


def drop_old_versions(con: duckdb.DuckDBPyConnection, *, published: str, kept: set[str],
                      history_tables: tuple[str, ...] = ()) -> list[str]:
    """Drop versioned tables no view needs: all but the published revision's, except the history
    tables of the ``kept`` revisions (which the ``*_history`` views read)."""
    published_key = revision_key(published)
    kept_keys = {revision_key(r) for r in kept} | {published_key}
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [VERSIONS_SCHEMA]).fetchall()]
    dropped = []
    for name in names:
        table, _, key = name.rpartition("__")
        if key == published_key or (key in kept_keys and table in history_tables):
            continue
        con.execute(f"DROP TABLE IF EXISTS {quoted(VERSIONS_SCHEMA, name)}")
        dropped.append(name)
    return dropped


def read_version(con: duckdb.DuckDBPyConnection, table: str, revision: str, columns: str = "*"):
    """``table`` as written for ``revision``, as a Polars frame."""
    return read_frame(con, f"SELECT {columns} FROM {versioned(table, revision)}")


def write_version(con: duckdb.DuckDBPyConnection, table: str, revision: str, frame) -> int:
    """Write ``frame`` as ``table`` of ``revision`` (staged, then swapped in); return its rows."""
    return write_table(con, VERSIONS_SCHEMA, versioned_name(table, revision), frame)
